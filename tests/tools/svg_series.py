"""Parses an SVG written by `reftrain plot` with Python's XML parser (so it must be well formed)
and prints what it draws as one JSON object:
  {"texts": [every <text> content, in order],
   "series": [{"run", "kind", "points" (data-points), "polylines", "circles", "drawn" (the
               number of x,y pairs over the series' polylines)}, ...]}

Usage: /usr/bin/python3 tests/tools/svg_series.py PLOT.svg
"""
import json
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main():
    root = ET.parse(sys.argv[1]).getroot()
    if root.tag != NS + "svg":
        sys.exit(f"root element is {root.tag}, not svg")
    texts = [t.text or "" for t in root.iter(NS + "text")]
    series = []
    for g in root.iter(NS + "g"):
        if g.get("class") != "series":
            continue
        lines = g.findall(NS + "polyline")
        series.append({"run": g.get("data-run"), "kind": g.get("data-kind"),
                       "points": int(g.get("data-points")), "polylines": len(lines),
                       "circles": len(g.findall(NS + "circle")),
                       "drawn": sum(len(p.get("points").split()) for p in lines)})
    print(json.dumps({"texts": texts, "series": series}))


if __name__ == "__main__":
    main()
