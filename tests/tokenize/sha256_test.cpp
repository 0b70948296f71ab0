// SHA-256 against the FIPS 180-4 / NIST example vectors.
#include "hpctrain/core/sha256.hpp"

#include <boost/test/unit_test.hpp>

BOOST_AUTO_TEST_SUITE(sha256)

BOOST_AUTO_TEST_CASE(nist_vectors) {
  BOOST_TEST(hpctrain::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(hpctrain::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  BOOST_TEST(hpctrain::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  hpctrain::Sha256 million_a;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i) million_a.update(chunk);
  BOOST_TEST(million_a.hex_digest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Splitting the input at any point gives the same digest (buffering across update calls).
BOOST_AUTO_TEST_CASE(incremental_equals_one_shot) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += char('a' + i % 26);
  const std::string expected = hpctrain::sha256_hex(text);
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    hpctrain::Sha256 hasher;
    hasher.update(std::string_view(text).substr(0, cut));
    hasher.update(std::string_view(text).substr(cut));
    BOOST_TEST(hasher.hex_digest() == expected, "cut at " << cut);
  }
}

BOOST_AUTO_TEST_SUITE_END()
