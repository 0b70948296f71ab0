// io::check_output_file: an output is never one of the inputs (same inode), and replaces a file only with --overwrite.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/output_check.hpp"
#include "io_test_util.hpp"

namespace fs = std::filesystem;
using hpctrain::Error;
using hpctrain::io::check_output_file;
using hpctrain::io::test::ScratchDir;
using hpctrain::io::test::write_bytes;

namespace {

std::string error_of(const fs::path& output, const std::vector<fs::path>& inputs, bool overwrite) {
  try {
    (void)check_output_file(output, inputs, overwrite);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(output_check)

BOOST_AUTO_TEST_CASE(an_input_is_refused_by_every_name_even_with_overwrite) {
  ScratchDir dir;
  write_bytes(dir / "in.h5", "data");
  fs::create_symlink(dir / "in.h5", dir / "soft.h5");
  fs::create_hard_link(dir / "in.h5", dir / "hard.h5");
  for (const fs::path& name : {dir / "in.h5", dir / "soft.h5", dir / "hard.h5", dir.path() / "." / "in.h5"}) {
    BOOST_TEST(has(error_of(name, {dir / "in.h5"}, true), "is the input"), name);
    BOOST_TEST(has(error_of(dir / "in.h5", {name}, true), "is the input"), name);
  }
  // Through a folder that does not exist yet: the path names the input once the folder is created.
  BOOST_TEST(has(error_of(dir.path() / "not-yet" / ".." / "in.h5", {dir / "in.h5"}, true), "is the input"));
  BOOST_TEST(hpctrain::io::same_file(dir / "soft.h5", dir / "hard.h5"));
  BOOST_TEST(!hpctrain::io::same_file(dir / "in.h5", dir / "missing"));
}

BOOST_AUTO_TEST_CASE(existing_outputs_need_overwrite_and_folders_are_refused) {
  ScratchDir dir;
  write_bytes(dir / "in.h5", "data");
  write_bytes(dir / "out.jsonl", "old");
  BOOST_TEST(error_of(dir / "new.jsonl", {dir / "in.h5", ""}, false) == "");
  BOOST_TEST(has(error_of(dir / "out.jsonl", {dir / "in.h5"}, false), "exists; pass --overwrite"));
  BOOST_TEST(error_of(dir / "out.jsonl", {dir / "in.h5"}, true) == "");
  fs::create_directories(dir / "folder");
  BOOST_TEST(has(error_of(dir / "folder", {}, true), "is a folder"));
  BOOST_TEST(check_output_file(dir.path() / "x" / ".." / "new.jsonl", {}, false) == dir / "new.jsonl");
}

BOOST_AUTO_TEST_CASE(files_in_lists_the_regular_files_of_a_folder) {
  ScratchDir dir;
  write_bytes(dir / "config.json", "{}");
  fs::create_directories(dir / "sub");
  const auto files = hpctrain::io::files_in(dir.path());
  BOOST_TEST_REQUIRE(files.size() == 1u);
  BOOST_TEST(files[0].filename() == "config.json");
  BOOST_TEST(hpctrain::io::files_in(dir / "missing").empty());
}

BOOST_AUTO_TEST_SUITE_END()
