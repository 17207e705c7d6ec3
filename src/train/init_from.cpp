// Starting a run from another run's weights: compatibility checks, then the weights alone (the
// optimizer state, step and RNG of the source stay behind: the new run is a new run).
#include "train/init_from.h"

#include <nlohmann/json.hpp>
#include <map>
#include <sstream>

#include "train/run_dir.h"
#include "util/files.h"

namespace poslab {

InitSource read_init_source(const std::string& dir, Config& c) {
  const std::string flag = "--init-from " + dir + ": ";
  RunPaths paths{dir};
  if (!is_run_dir(dir)) throw ConfigError(flag + no_run_here(dir));
  if (!file_exists(paths.checkpoint())) throw ConfigError(flag + "no checkpoint.pt (the run stopped before its first checkpoint)");
  // The source's own config is read as it was recorded (its plug-in at the path it had then): an error there
  // is about the source run, not about this command's --config or --set.
  Config source;
  try {
    source = paths.read_config();
  } catch (const ConfigError& e) {
    throw ConfigError(flag + e.what());
  }
  InitSource s{dir, source, paths.read_vocab(), nullptr};
  if (file_exists(paths.summary())) {
    try {
      s.summary = read_json_file(paths.summary());
    } catch (const ConfigError&) {
      // A damaged summary says nothing about the weights, which the checkpoint holds: recorded as unknown.
    }
  }
  const auto &from = s.config.model, &to = c.model;
  auto same = [&](const char* key, const auto& there, const auto& here) {
    if (there == here) return;
    std::ostringstream msg;
    msg << std::boolalpha << flag << key << " is " << there << " there but " << here << " here (the weights would not fit)";
    throw ConfigError(msg.str());
  };
  same("model.n_layer", from.n_layer, to.n_layer);
  same("model.n_embd", from.n_embd, to.n_embd);
  same("model.n_head", from.n_head, to.n_head);
  same("model.bias", from.bias, to.bias);
  same("model.pos_encoding.kind", from.pos_encoding.kind, to.pos_encoding.kind);
  auto& rs = c.model.pos_encoding.rope_scaling;
  if (rs.kind != "none" && rs.original_length == 0) rs.original_length = from.block_size;
  return s;
}

namespace {
// Leaves of a JSON object as dotted keys ("pos_encoding.rope_scaling.kind"); arrays are leaves.
void flatten(const nlohmann::json& j, const std::string& at, std::map<std::string, nlohmann::json>& out) {
  if (!j.is_object()) {
    out[at] = j;
    return;
  }
  for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), at + "." + it.key(), out);
}
}  // namespace

nlohmann::json init_source_record(const InitSource& s, const Config& c) {
  const auto& sum = s.summary;
  const auto field = [&](const char* k) { return sum.is_object() && sum.contains(k) ? sum[k] : nlohmann::json(nullptr); };
  std::map<std::string, nlohmann::json> there, here;
  flatten(config_to_json(s.config)["model"], "model", there);
  flatten(config_to_json(c)["model"], "model", here);
  nlohmann::json changed = nlohmann::json::object();
  for (const auto& [key, value] : here) {
    if (key == "model.block_size") continue;  // recorded on its own
    const auto it = there.find(key);
    const nlohmann::json was = it == there.end() ? nlohmann::json(nullptr) : it->second;
    if (was != value) changed[key] = {{"there", was}, {"here", value}};
  }
  return {{"run", absolute_path(s.dir)}, {"block_size", s.config.model.block_size},
          {"status", field("status").is_string() ? field("status") : nlohmann::json("unknown")},
          {"step", field("step")}, {"max_iters", s.config.train.max_iters}, {"changed", changed}};
}

std::string describe_init_source(const nlohmann::json& r) {
  std::string text = r["run"].get<std::string>() + " (block_size " + r["block_size"].dump();
  if (r["step"].is_number()) text += ", step " + r["step"].dump() + " of " + r["max_iters"].dump();
  if (r["status"] != "done") text += ", status " + r["status"].get<std::string>();
  for (auto it = r["changed"].begin(); it != r["changed"].end(); ++it)
    text += "; " + it.key() + " " + it.value()["here"].dump() + " here, " + it.value()["there"].dump() + " there";
  return text + ")";
}

void init_weights_from(const InitSource& s, GPT& model, const CharTokenizer& tokenizer, const PosEncodingConfig& target_pe) {
  const std::string flag = "--init-from " + s.dir + ": ";
  const nlohmann::json there = s.tokenizer.to_json(), here = tokenizer.to_json();
  const auto kind_of = [](const CharTokenizer& t) {
    return t.is_sentencepiece() ? "SentencePiece pieces" : t.ids_only() ? "bare ids" : "characters";
  };
  if (there != here && (!there.is_array() || !here.is_array())) {
    // Vocabularies of two kinds (SentencePiece pieces against characters, say): no id-by-id difference to show.
    throw ConfigError(flag + "its vocabulary (" + std::to_string(s.tokenizer.size()) + " " + kind_of(s.tokenizer) +
                      ") differs from this config's data (" + std::to_string(tokenizer.size()) + " " + kind_of(tokenizer) +
                      "); token ids would mean other text");
  }
  if (there != here)  // the first place they differ (same sizes, another character at an id, say)
    throw ConfigError(flag + "its vocabulary (" + std::to_string(s.tokenizer.size()) + " symbols) differs from this config's data (" +
                      std::to_string(tokenizer.size()) + " symbols; first at " +
                      vocabulary_difference(s.tokenizer, tokenizer, "there", "here") + "); token ids would mean other characters");
  // A bounded table (learned positions) holds one trained row per position: there is nothing to
  // fill new rows with, and interpolating rows is not what the encoding learned.
  auto source_pos = make_positional({s.config.model.pos_encoding, s.config.model.n_embd, s.config.model.n_head,
                                     s.config.model.block_size});
  const int64_t had = source_pos->max_positions(), want = model->pos->max_positions();
  if (had >= 0 && want > had)
    throw ConfigError(flag + "a " + model->pos->kind() + " position table cannot grow from " + std::to_string(had) +
                      " to " + std::to_string(want) + " rows: there are no trained rows for the new positions " +
                      "(keep model.block_size at " + std::to_string(s.config.model.block_size) +
                      ", or fine-tune an encoding without a table, e.g. rope)");
  if (had >= 0 && want < had)  // the weights are copied whole: a table of another shape would not take them
    throw ConfigError(flag + "a " + model->pos->kind() + " position table of " + std::to_string(had) +
                      " rows cannot be cut to " + std::to_string(want) + " (keep model.block_size at " +
                      std::to_string(s.config.model.block_size) + "; a shorter context needs no fine-tune: evaluate the "
                      "run at the shorter length)");
  // An option of the kind that shapes its parameters (cope's npos, t5's num_buckets, fire's mlp_width) set
  // otherwise here: named by its key, not left to the checkpoint's message about a tensor.
  const auto target = model->pos->named_parameters();
  for (const auto& p : source_pos->named_parameters()) {
    const auto* mine = target.find(p.key());
    if (mine == nullptr || mine->sizes() == p.value().sizes()) continue;
    Config wanted = s.config;
    wanted.model.pos_encoding = target_pe;
    const nlohmann::json there = config_to_json(s.config)["model"]["pos_encoding"],
                         here = config_to_json(wanted)["model"]["pos_encoding"];
    std::string keys;
    for (auto it = here.begin(); it != here.end(); ++it)
      if (!there.contains(it.key()) || there[it.key()] != it.value())
        keys += (keys.empty() ? "" : ", ") + std::string("model.pos_encoding.") + it.key() + " " + it.value().dump() + " here, " +
                (there.contains(it.key()) ? there[it.key()].dump() : std::string("unset")) + " there";
    std::ostringstream shapes;
    shapes << p.value().sizes() << " there, " << mine->sizes() << " here";
    throw ConfigError(flag + "the " + model->pos->kind() + " encoding's parameter " + p.key() + " has another shape (" +
                      shapes.str() + ")" + (keys.empty() ? std::string() : ": " + keys) +
                      "; fine-tune with the source run's values");
  }
  load_checkpoint_weights(RunPaths{s.dir}.checkpoint(), model);
}

}  // namespace poslab
