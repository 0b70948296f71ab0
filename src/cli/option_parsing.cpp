#include "option_parsing.hpp"

#include <fstream>
#include <iostream>

#include "hpctrain/core/error.hpp"

namespace hpctrain::cli {

bool parse_options(const std::vector<std::string>& args, const std::string& usage, po::options_description& options,
                   po::variables_map& values, const po::positional_options_description* positional) {
  po::options_description general("General");
  general.add_options()("help,h", "show this help")("config", po::value<std::string>(),
                                                    "read options from a file of `key = value` lines (command line wins)");
  po::options_description all;
  all.add(options).add(general);
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), values);
    if (values.count("help")) {
      std::cout << usage << "\n\n" << all << "\n";
      return false;
    }
    if (values.count("config")) {
      const std::string path = values["config"].as<std::string>();
      std::ifstream file(path);
      HPCTRAIN_CHECK(file.good(), "--config '{}' cannot be opened", path);
      po::store(po::parse_config_file(file, options), values);
    }
    po::notify(values);
  } catch (const po::error& e) {
    fail("{}\n  usage: {}\n  hint: run with --help to list the options", e.what(), usage);
  }
  return true;
}

}  // namespace hpctrain::cli
