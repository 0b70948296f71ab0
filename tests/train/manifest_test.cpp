// The checkpoint manifest (Note [Verified checkpoints]): sha256sum format, verification naming the file.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>

#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/train/checkpoint.hpp"

using namespace hpctrain;
using namespace hpctrain::train;
using trainer_test::Scratch;
namespace fs = std::filesystem;

namespace {

fs::path make_folder(const Scratch& scratch) {
  const fs::path dir = scratch / "checkpoint-3";
  fs::create_directories(dir / "sub");
  write_text(dir / kTrainerStateName, "{\"global_step\": 3}\n");
  write_text(dir / kModelWeightsName, std::string(1000, 'w'));
  write_text(dir / "sub" / "vocab.txt", "a\nb\n");
  write_manifest(dir);
  return dir;
}

std::string error_of(const fs::path& dir) {
  try {
    return verify_checkpoint(dir).empty() ? "" : "warning";
  } catch (const Error& e) {
    return e.what();
  }
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(manifest)

BOOST_AUTO_TEST_CASE(written_in_sha256sum_format_for_every_file) {
  Scratch scratch("manifest-format");
  const fs::path dir = make_folder(scratch);
  const auto entries = parse_manifest(read_text(dir / kManifestName), "m");
  BOOST_TEST_REQUIRE(entries.size() == 3u);
  BOOST_TEST(entries[0].name == "model.safetensors");
  BOOST_TEST(entries[0].sha256 == sha256_hex(std::string(1000, 'w')));
  BOOST_TEST(entries[1].name == "sub/vocab.txt");
  BOOST_TEST(entries[2].name == kTrainerStateName);
  BOOST_TEST(error_of(dir) == "");
  const std::string check = "cd '" + dir.string() + "' && sha256sum -c --quiet " + kManifestName + " >/dev/null";
  BOOST_TEST(std::system(check.c_str()) == 0);  // the coreutils tool agrees
}

BOOST_AUTO_TEST_CASE(a_flipped_byte_a_missing_or_an_added_file_is_named) {
  Scratch scratch("manifest-verify");
  const fs::path dir = make_folder(scratch);
  std::string bytes = read_text(dir / kModelWeightsName);
  bytes[500] ^= 1;
  write_text(dir / kModelWeightsName, bytes);
  BOOST_TEST(has(error_of(dir), "checkpoint-3/model.safetensors: SHA-256 checksum mismatch"), error_of(dir));
  bytes[500] ^= 1;
  write_text(dir / kModelWeightsName, bytes);
  BOOST_TEST(error_of(dir) == "");
  fs::remove(dir / "sub" / "vocab.txt");
  BOOST_TEST(has(error_of(dir), "sub/vocab.txt: listed in checksums.sha256 but missing"));
  write_text(dir / "sub" / "vocab.txt", "a\nb\n");
  write_text(dir / "model-00002-of-00002.safetensors", "x");
  BOOST_TEST(has(error_of(dir), "model-00002-of-00002.safetensors: not listed"));
  fs::remove(dir / "model-00002-of-00002.safetensors");
  write_text(dir / "README.md", "notes");  // not a file resume reads: ignored
  BOOST_TEST(error_of(dir) == "");
}

BOOST_AUTO_TEST_CASE(no_manifest_is_a_warning_and_a_bad_manifest_an_error) {
  Scratch scratch("manifest-bad");
  const fs::path dir = make_folder(scratch);
  const std::string good = read_text(dir / kManifestName);
  fs::remove(dir / kManifestName);
  BOOST_TEST(has(verify_checkpoint(dir), "not verified"));
  write_text(dir / kManifestName, "nothex  model.safetensors\n");
  BOOST_TEST(has(error_of(dir), "checksums.sha256: line 1"));
  write_text(dir / kManifestName, std::string(64, 'a') + "  ../escape\n");
  BOOST_TEST(has(error_of(dir), "is not a file inside the checkpoint"));
  write_text(dir / kManifestName, good);
  BOOST_TEST(error_of(dir) == "");
}

BOOST_AUTO_TEST_SUITE_END()
