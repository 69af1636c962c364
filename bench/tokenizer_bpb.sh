#!/usr/bin/env bash
# The laptop preset on 2 threads: bytes against a BPE tokenizer ($TOK) in the same wall time.
# A 60-step pilot of each measures ms/step; the BPE run gets the steps that fit the bytes run's
# 2000-step time. Prints val loss, bytes per token of the val split and bits per byte.
#   DATA=corpus.txt TOK=tok.json OUT=dir bench/tokenizer_bpb.sh
set -euo pipefail
R=${REFTRAIN:-build/reftrain}; DATA=${DATA:?a text file}; TOK=${TOK:?a tokenizer.json}
OUT=${OUT:?a directory for the traces}
mkdir -p "$OUT"
ms() { /usr/bin/python3 -c "import json,sys,statistics as s; print(s.median([j['ms'] for j in map(json.loads, open(sys.argv[1])) if j.get('type')=='step' and j['step']>5]))" "$1"; }
$R train --data $DATA --steps 60 --threads 2 --trace /tmp/pb.jsonl > /dev/null
$R train --data $DATA --tokenizer $TOK --steps 60 --threads 2 --trace /tmp/pt.jsonl > /dev/null
mb=$(ms /tmp/pb.jsonl); mt=$(ms /tmp/pt.jsonl)
steps=$(/usr/bin/python3 -c "print(round(2000*$mb/$mt))")
echo "pilot ms/step: bytes $mb, bpe4k $mt -> bpe4k steps $steps"
$R train --data $DATA --threads 2 --trace $OUT/bytes.jsonl > $OUT/bytes.log 2>&1 &
$R train --data $DATA --tokenizer $TOK --steps $steps --threads 2 --trace $OUT/bpe.jsonl > $OUT/bpe.log 2>&1 &
wait
for f in bytes bpe; do grep -E "^done|val  step" $OUT/$f.log | tail -2; done
cache=$(ls "$DATA".bpe-*.tokens | head -1)
/usr/bin/python3 - "$cache" "$OUT/bpe.jsonl" "$OUT/bytes.jsonl" <<'PY' > /tmp/val_ids.txt
import json, sys, struct
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<i', data[8:12])[0]
ids = struct.unpack('<%dH' % n, data[1024:1024 + 2 * n])
print(' '.join(map(str, ids[n * 9 // 10:])))
PY
valbytes=$($R tokenizer decode --tokenizer $TOK /tmp/val_ids.txt | wc -c)
/usr/bin/python3 - "$OUT/bytes.jsonl" "$OUT/bpe.jsonl" "$valbytes" <<'PY'
import json, math, sys
for path, vb in ((sys.argv[1], None), (sys.argv[2], int(sys.argv[3]))):
    lines = [json.loads(l) for l in open(path)]
    run = lines[0]; val = [l for l in lines if l.get('type') == 'val'][-1]
    secs = sum(l['ms'] for l in lines if l.get('type') == 'step') / 1000
    vt = run['data']['val_tokens']; vb = vb or vt
    print(f"{path.split('/')[-1]}: steps {val['step']}, train {secs:.1f} s, val loss {val['val_loss']:.4f} nats/token, "
          f"val {vt} tokens / {vb} bytes = {vb/vt:.3f} bytes/token, {val['val_loss']/math.log(2)*vt/vb:.4f} bits/byte")
PY
