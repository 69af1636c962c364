// explain init: the numbers of docs/training.md's "Initialisation" and of the optimizer's
// layout, printed from the program for every preset: init_std (the formula Model::init_weights
// draws with), the parameter tensors (one GPU dispatch each, were every tensor its own call) and
// the 8-bit optimizer's block scales (quant_scale_count). A page quotes these instead of typing
// them by hand.
#include "core/model/model.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "core/train/config.h"
#include "optim/optimizer.h"

namespace reftrain::explain {

namespace {

void run_init(Printer& out, uint64_t /*seed*/) {
  out.title("init: every preset's init std, tensor count and 8-bit scale count");
  out.line("(init_std, core/model/model.cpp: 0.02 for matrices and embeddings,");
  out.line(" 0.02/sqrt(2L) for attn.c_proj and mlp.c_proj (llama: o_proj, down_proj);");
  out.line(" scales: quant_scale_count = ceil(wd_end/256) + ceil((P - wd_end)/256))");
  out.section("preset         L   std     residual std   tensors   P (slots)   scales");
  for (const Preset& p : presets()) {
    const ParamLayout layout = param_layout(p.model);
    char buf[128];
    std::snprintf(buf, sizeof buf, "  %-12s %2d   %.4f  %.6f     %5zu   %11zu   %6zu",
                  p.name.c_str(), p.model.layers, init_std(ParamInit::kNormal, p.model.layers),
                  init_std(ParamInit::kNormalResidual, p.model.layers), layout.tensors().size(),
                  layout.total(), quant_scale_count(layout.wd_end(), layout.total()));
    out.line(buf);
  }
  out.line("");
  for (const char* name : {"tiny", "baby"}) {
    const int L = find_preset(name).model.layers;
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %s: L = %d, residual std 0.02/sqrt(%d) = %.6f", name, L,
                  2 * L, init_std(ParamInit::kNormalResidual, L));
    out.line(buf);
  }
}

}  // namespace

void add_model(std::vector<Explainer>& v) {
  v.push_back({"init", "the init std, tensors and 8-bit scales of every preset", "docs/training.md",
               run_init});
}

}  // namespace reftrain::explain
