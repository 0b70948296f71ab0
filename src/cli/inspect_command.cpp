// `hpctrain inspect FILE.h5`: summary of a dataset file (models come with the AutoModel issue).
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/prep/dataset_summary.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {

int inspect_command(const Args& args) {
  std::string path;
  bool json = false, validate = false;
  po::options_description options("Inspect");
  options.add_options()
      ("path", po::value(&path)->required(), "a dataset file (.h5) or a Hugging Face model folder")
      ("json", po::bool_switch(&json), "print JSON for scripts")
      ("validate", po::bool_switch(&validate), "also check every split fully (offsets, token ids, labels)");
  po::positional_options_description positional;
  positional.add("path", 1);
  po::variables_map values;
  if (!parse_options(args, "hpctrain inspect FILE.h5|MODEL_DIR [--json] [--validate]", options, values, &positional)) return 0;
  HPCTRAIN_CHECK(std::filesystem::exists(path), "'{}' does not exist", path);
  if (std::filesystem::is_directory(path)) return inspect_model(path, json);
  const auto summary = prep::summarize_dataset(path, validate);
  if (json) std::cout << summary.dump(2) << "\n";
  else std::cout << prep::format_dataset_summary(summary);
  return 0;
}

}  // namespace hpctrain::cli
