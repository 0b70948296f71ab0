// `hpctrain generate`: a causal LM folder continues a text prompt, greedy or sampled, over a KV cache, in one
// process. The glue between the tokenizer (tokenize/) and generation (models/generation.hpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "chat_prompt.hpp"
#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/adapter_base.hpp"
#include "hpctrain/models/generation.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "hpctrain/train/threads.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGenerateUsage =
    "hpctrain generate --model DIR [--adapter DIR] [--tokenizer DIR] --prompt TEXT --max-new-tokens N "
    "[--temperature T --top-k K --top-p P --seed S --num-return-sequences N] [--chat [--system TEXT]] [--json]\n"
    "  one process (refused when a launcher started several); greedy unless --temperature > 0";

struct GenerateOptions {
  std::string model, adapter, tokenizer, prompt;
  models::GenerationOptions generation;
  int64_t seed = 0;
  int64_t num_return_sequences = 1;
  int threads = 0;
  bool json = false;
  QuantizeBaseFlags quantize;  // QLoRA: the base's frozen layers in 4-bit form (needs --adapter)
  bool chat = false;
  std::string system, chat_template;
};

po::options_description generate_options(GenerateOptions& o) {
  models::GenerationOptions& g = o.generation;
  po::options_description options("Generate");
  options.add_options()
      ("model", po::value(&o.model)->required(),
       "causal LM folder (gpt2, llama, qwen2: config.json + model.safetensors)")
      ("adapter", po::value(&o.adapter), "LoRA adapter folder in PEFT's format applied to --model")
      ("tokenizer", po::value(&o.tokenizer), "folder with tokenizer.json (default: the --model folder)")
      ("prompt", po::value(&o.prompt)->required(), "the text to continue (encoded with the tokenizer's special tokens, "
       "e.g. a Llama-3 BOS)")
      ("max-new-tokens", po::value(&g.max_new_tokens)->required(), "the most tokens to generate (>= 1); generation "
       "also stops after an EOS id (generation_config.json's eos_token_id, else config.json's)")
      ("temperature", po::value(&g.temperature)->default_value(0.0), "0: greedy (transformers' do_sample=False); "
       "> 0: sample from softmax(logits / T)")
      ("top-k", po::value(&g.top_k)->default_value(0), "sampling: keep the K most likely tokens (0: all)")
      ("top-p", po::value(&g.top_p)->default_value(1.0), "sampling: keep the most likely tokens whose probabilities "
       "sum to >= P (1: all)")
      ("seed", po::value(&o.seed)->default_value(0), "sampling: the same seed draws the same tokens (hpctrain's own "
       "generator: not the tokens torch.manual_seed gives transformers)")
      ("num-return-sequences", po::value(&o.num_return_sequences)->default_value(1), "sampling: draw N continuations "
       "of the prompt in one call, one after the other from the seed's generator (one output each; greedy: 1)")
      ("threads", po::value(&o.threads)->default_value(0), "CPU threads (0: the cores)")
      ("chat", po::bool_switch(&o.chat), "the prompt is a user message, rendered with the tokenizer folder's chat "
       "template and add_generation_prompt (as apply_chat_template); the reply stops at the template's end-of-turn "
       "token (or EOS), and only the reply is printed")
      ("system", po::value(&o.system), "--chat: a system message before the user's")
      ("chat-template", po::value(&o.chat_template), "--chat: a Jinja chat template file instead of the folder's")
      ("json", po::bool_switch(&o.json), "print one JSON object {\"prompt_ids\", \"new_ids\", \"text\"} per line "
       "(one per sequence): text is the new tokens decoded (the prompt not included, EOS token included when "
       "generation stopped at it)");
  options.add(quantize_base_group(o.quantize));
  return options;
}

// Open MPI's, MPICH's and srun's count of the processes launched together (1 when none is set).
long launched_processes() {
  long most = 1;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    if (const char* value = std::getenv(name)) most = std::max(most, std::strtol(value, nullptr, 10));
  }
  return most;
}

// Runs `check` (a models:: check whose errors start "field_name: ...") with the error naming the option instead:
// "top_k: expected ..." -> "--top-k: expected ...".
template <typename Check>
void naming_options(const Check& check) {
  try {
    check();
  } catch (const Error& error) {
    std::string message = error.what();
    const auto colon = message.find(':');
    std::string field = message.substr(0, colon);
    std::replace(field.begin(), field.end(), '_', '-');
    fail("--{}{}", field, message.substr(colon));
  }
}

void check_generate_options(const GenerateOptions& o) {
  const long processes = launched_processes();
  HPCTRAIN_CHECK(processes <= 1,
                 "hpctrain generate runs in one process, but it was started as one of {} (mpirun -np / srun); run it "
                 "without a launcher",
                 processes);
  HPCTRAIN_CHECK(o.seed >= 0, "--seed: expected an integer >= 0, got {}", o.seed);
  HPCTRAIN_CHECK(o.threads >= 0, "--threads: expected a count >= 0 (0: the cores), got {}", o.threads);
  HPCTRAIN_CHECK(o.chat || (o.system.empty() && o.chat_template.empty()), "--system and --chat-template go with --chat");
  constexpr int64_t kMostSequences = 1 << 16;
  HPCTRAIN_CHECK(o.num_return_sequences >= 1 && o.num_return_sequences <= kMostSequences,
                 "--num-return-sequences: expected 1 to {}, got {}", kMostSequences, o.num_return_sequences);
  HPCTRAIN_CHECK(o.num_return_sequences == 1 || o.generation.temperature > 0,
                 "--num-return-sequences {}: greedy decoding (--temperature 0) gives one sequence (as transformers "
                 "refuses num_return_sequences > 1 without sampling)\n  hint: add --temperature T > 0 to sample",
                 o.num_return_sequences);
  naming_options([&] { models::check_generation_options(o.generation); });
  if (o.generation.temperature == 0 && (o.generation.top_k != 0 || o.generation.top_p != 1.0))
    log::warning("--top-k and --top-p apply when sampling (--temperature > 0); greedy decoding ignores them");
}

// --tokenizer, else the model folder: checked before the weights are read; an Error naming the folder looked in.
fs::path tokenizer_folder(const GenerateOptions& o) {
  const fs::path folder = o.tokenizer.empty() ? fs::path(o.model) : fs::path(o.tokenizer);
  HPCTRAIN_CHECK(fs::is_regular_file(folder / "tokenizer.json"),
                 "no tokenizer.json in {} ({}): pass --tokenizer DIR, a folder with the model's tokenizer.json",
                 folder.string(), o.tokenizer.empty() ? "the --model folder" : "--tokenizer");
  return folder;
}

std::shared_ptr<models::CausalLM> load_model(const std::string& dir, const std::string& adapter,
                                             const std::optional<models::Quant4Options>& quantize) {
  HPCTRAIN_CHECK(!quantize || !adapter.empty(), "--quantize-base {} needs --adapter DIR: QLoRA generates with a LoRA "
                 "adapter over the 4-bit base", models::to_string(quantize->type));
  models::Loaded<models::CausalLM> loaded;
  if (quantize) {  // Note [Quantized at load]: quantized as it is read, after the adapter is attached
    const io::HfConfig config = io::HfConfig::load(dir);
    models::check_not_prequantized(config);
    std::string quantized;
    models::Loaded<models::Model> any = models::load_quantized_with_adapter(dir, adapter, config, *quantize, &quantized);
    loaded.model = std::dynamic_pointer_cast<models::CausalLM>(any.model);
    HPCTRAIN_CHECK(loaded.model != nullptr, "'{}': {} is not a causal LM: generate needs one", dir,
                   any.model->spec().architecture);
    loaded.report = std::move(any.report);
    log::info("{}", quantized);
  } else {
    loaded = models::causal_lm_from_pretrained(dir);
    if (!adapter.empty()) (void)models::load_adapter(*loaded.model, adapter);  // Note [LoRA]
  }
  if (!loaded.report.newly_initialized.empty())
    log::warning("{}: the LM head is not in the checkpoint; the generated tokens are random\n{}", dir,
                 loaded.report.summary());
  loaded.model->eval();
  return loaded.model;
}

}  // namespace

int generate_command(const Args& args) {
  GenerateOptions o;
  po::options_description options = generate_options(o);
  po::variables_map values;
  if (!parse_options(args, kGenerateUsage, options, values)) return 0;
  check_generate_options(o);
  if (o.json) {  // stdout holds the JSON alone (loading logs notes, e.g. --quantize-base's)
    log::Context quiet = log::context();
    quiet.quiet = true;
    log::set_context(quiet);
  }
  (void)train::apply_threads(o.threads, 1);
  const fs::path tokenizer_dir = tokenizer_folder(o);
  const std::shared_ptr<models::CausalLM> model = load_model(o.model, o.adapter, quantize_base_options(o.quantize));
  const auto tokenizer = tokenize::ByteLevelBpeTokenizer::from_pretrained(tokenizer_dir);
  o.generation.seed = static_cast<uint64_t>(o.seed);
  o.generation.eos_token_ids = models::eos_token_ids(o.model);
  std::vector<int32_t> encoded;
  if (o.chat) {
    ChatPrompt chat = chat_prompt(tokenizer, tokenizer_dir, o.chat_template, o.system, o.prompt);
    encoded = std::move(chat.ids);
    for (const int64_t id : chat.stop_ids)
      if (std::find(o.generation.eos_token_ids.begin(), o.generation.eos_token_ids.end(), id) == o.generation.eos_token_ids.end())
        o.generation.eos_token_ids.push_back(id);
  } else {
    encoded = tokenizer.encode(o.prompt);
  }
  const std::vector<int64_t> prompt_ids(encoded.begin(), encoded.end());
  naming_options([&] {  // before any token: the limit is named with --max-new-tokens
    models::check_generation_fits(model->config(), static_cast<int64_t>(prompt_ids.size()),
                                  o.generation.max_new_tokens, core::available_host_memory());
  });
  const auto& stops = o.generation.eos_token_ids;
  for (const std::vector<int64_t>& new_ids : models::generate(*model, prompt_ids, o.generation, o.num_return_sequences)) {
    const std::string text = tokenizer.decode(std::vector<int32_t>(new_ids.begin(), new_ids.end()));
    if (o.json) {
      std::cout << nlohmann::json{{"prompt_ids", prompt_ids}, {"new_ids", new_ids}, {"text", text}}.dump() << "\n";
    } else if (o.chat) {  // the reply, without the token that ended it
      const bool stopped = !new_ids.empty() && std::find(stops.begin(), stops.end(), new_ids.back()) != stops.end();
      std::cout << tokenizer.decode(std::vector<int32_t>(new_ids.begin(), new_ids.end() - (stopped ? 1 : 0))) << "\n";
    } else {
      std::cout << o.prompt << text << "\n";
    }
  }
  return 0;
}

}  // namespace hpctrain::cli
