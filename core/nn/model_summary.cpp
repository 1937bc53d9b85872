// Model summaries: per-layer shapes, parameters, FLOPs and activation bytes, and their table.
#include "core/nn/model_summary.hpp"

#include <cstdio>
#include <sstream>

#include "core/nn/model.hpp"

namespace syncopate {
namespace {

std::string details(const LayerSpec& s) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  const std::string bias = s.bias == Bias::kNo ? ", no bias" : "";
  switch (s.kind) {
    case LayerKind::kDense:
    case LayerKind::kTiedDense:
      return n(s.in) + " -> " + n(s.out) + (s.kind == LayerKind::kDense ? bias : ", tied");
    case LayerKind::kConv2d:
      return n(s.in) + " -> " + n(s.out) + ", " + n(s.kernel) + "x" + n(s.kernel) + " /" +
             n(s.stride) + " pad " + n(s.padding) + bias;
    case LayerKind::kMaxPool2d:
    case LayerKind::kAvgPool2d:
      return n(s.kernel) + "x" + n(s.kernel) + " /" + n(s.stride);
    case LayerKind::kEmbedding:
      return n(s.in) + " x " + n(s.out) +
             (s.positions > 0 ? " + " + n(s.positions) + " positions" : "");
    case LayerKind::kAttention:
      return n(s.heads) + " heads of " + n(s.in / s.heads) + bias;
    case LayerKind::kSwiglu:
      return n(s.in) + " -> " + n(s.width) + " -> " + n(s.in);
    case LayerKind::kBottleneck:
      return n(s.in) + " -> " + n(s.width) + " -> " + n(s.out) + " /" + n(s.stride);
    case LayerKind::kResidual: {
      std::string inside;
      for (const LayerSpec& layer : s.layers)
        inside += (inside.empty() ? "" : ", ") + std::string(to_string(layer.kind));
      return "x + (" + inside + ")";
    }
    case LayerKind::kDropout: {
      std::ostringstream out;
      out << "rate " << s.rate;
      return out.str();
    }
    default:
      return "";
  }
}

// 1234567 -> "1,234,567".
std::string grouped(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string si(double v, std::string_view unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  int u = 0;
  while (v >= 1000.0 && u < 6) {
    v /= 1000.0;
    ++u;
  }
  char text[32];
  const std::string suffix = prefixes[u] + std::string(unit);
  if (suffix.empty())
    std::snprintf(text, sizeof text, "%.0f", v);
  else
    std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.3g %s", v, suffix.c_str());
  return text;
}

ModelSummary summarize_model(const ModelSpec& spec, int64_t batch) {
  const auto model = make_model(spec, Storage::kShapeOnly);
  model->set_batch(batch);
  ModelSummary out;
  out.name = spec.name;
  out.input = {batch};
  out.batch = batch;
  out.input.insert(out.input.end(), spec.sample_shape.begin(), spec.sample_shape.end());
  Shape shape = out.input;
  for (int i = 0; i < model->num_layers(); ++i) {
    const LayerSpec& layer = spec.layers[static_cast<size_t>(i)];
    shape = model->layer(i).output_shape(shape);
    LayerSummary row;
    row.kind = std::string(to_string(layer.kind));
    row.details = details(layer);
    row.output = shape;
    row.params = model->layer(i).num_params();
    row.forward_flops = model->forward_cost(i).flops;
    row.backward_flops = model->backward_cost(i).flops;
    row.activation_bytes = 4.0 * static_cast<double>(numel(shape));
    out.params += row.params;
    out.forward_flops += row.forward_flops;
    out.backward_flops += row.backward_flops;
    out.activation_bytes += row.activation_bytes;
    out.layers.push_back(std::move(row));
  }
  return out;
}

std::string format_summary(const ModelSummary& s) {
  std::ostringstream out;
  char line[256];
  out << "model " << s.name << ": input " << to_string(s.input) << " (batch " << s.batch << ")\n";
  std::snprintf(line, sizeof line, "%-4s %-48s %-20s %15s %10s %10s %10s\n", "#", "layer", "output",
                "parameters", "fwd FLOPs", "bwd FLOPs", "act bytes");
  out << line << std::string(123, '-') << "\n";
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerSummary& r = s.layers[i];
    const std::string name = r.kind + (r.details.empty() ? "" : " " + r.details);
    std::snprintf(line, sizeof line, "%-4zu %-48.48s %-20s %15s %10s %10s %10s\n", i, name.c_str(),
                  to_string(r.output).c_str(), grouped(r.params).c_str(),
                  si(r.forward_flops).c_str(), si(r.backward_flops).c_str(),
                  si(r.activation_bytes).c_str());
    out << line;
  }
  out << std::string(123, '-') << "\n";
  out << "parameters        " << grouped(s.params) << " ("
      << si(4.0 * static_cast<double>(s.params)) << "B as float32)\n";
  out << "forward FLOPs     " << si(s.forward_flops) << " per batch of " << s.batch << "\n";
  out << "backward FLOPs    " << si(s.backward_flops) << " per batch of " << s.batch << "\n";
  out << "activations       " << si(s.activation_bytes) << "B (every layer's output, float32)\n";
  return out.str();
}

}  // namespace syncopate
