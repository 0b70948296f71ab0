// Unit tests of the pieces: normalizer, pre-tokenizer, WordPiece, truncation, token table, thread safety.
#include "golden_cases.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/normalizer.hpp"
#include "hpctrain/tokenize/pre_tokenizer.hpp"
#include "hpctrain/tokenize/token_table.hpp"
#include "hpctrain/tokenize/truncation.hpp"
#include "hpctrain/tokenize/utf8.hpp"
#include "hpctrain/tokenize/wordpiece.hpp"

#include <boost/test/unit_test.hpp>

#include <thread>

using namespace hpctrain::tokenize;
using namespace hpctrain::tokenize::testing;

namespace {

using Words = std::vector<std::string>;

Words words_of(std::string_view text) {
  Words out;
  for (std::string_view w : BertPreTokenizer::split(text)) out.emplace_back(w);
  return out;
}

Vocab small_vocab(std::vector<std::string> tokens) { return Vocab::from_tokens(std::move(tokens), "test vocab"); }

std::vector<std::string> pieces(const WordPiece& model, const Vocab& vocab, std::string_view word) {
  std::vector<int32_t> ids;
  model.tokenize(word, ids);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(vocab.token(id));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(normalizer)

BOOST_AUTO_TEST_CASE(all_steps_off_is_identity_on_valid_text) {
  const BertNormalizer identity({false, false, false, false});
  for (const GoldenCase& c : load_golden_cases()) {
    if (c.replaced) continue;
    BOOST_TEST(identity.normalize(c.text) == c.text, "line " << c.line);
  }
}

BOOST_AUTO_TEST_CASE(output_is_always_valid_utf8) {
  const BertNormalizer uncased({true, true, true, true}), raw({false, true, true, true});
  for (const GoldenCase& c : load_golden_cases()) {
    BOOST_TEST(utf8::is_valid(uncased.normalize(c.text)), "line " << c.line);
    BOOST_TEST(utf8::is_valid(raw.normalize(c.text)), "line " << c.line);
  }
}

// handle_chinese_chars surrounds each CJK ideograph with spaces; Hangul is not in the CJK ranges.
BOOST_AUTO_TEST_CASE(chinese_characters_are_padded_hangul_is_not) {
  const BertNormalizer chinese_only({false, true, false, false});
  BOOST_TEST(chinese_only.normalize("a中b") == "a 中 b");
  BOOST_TEST(chinese_only.normalize("한국") == "한국");
}

// NFD sorts a run of non-starters by canonical combining class: U+1D16D (class 226) after U+1D165 (class 216);
// neither is a nonspacing mark, so strip_accents keeps both.
BOOST_AUTO_TEST_CASE(strip_accents_applies_canonical_order) {
  const BertNormalizer strip_only({false, false, true, false});
  BOOST_TEST(strip_only.normalize("x\U0001D16D\U0001D165") == "x\U0001D165\U0001D16D");
  BOOST_TEST(strip_only.normalize("x\U0001D165\U0001D16D") == "x\U0001D165\U0001D16D");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(pre_tokenizer)

BOOST_AUTO_TEST_CASE(splits_on_whitespace_and_isolates_punctuation) {
  BOOST_TEST(words_of("Hello, world!") == (Words{"Hello", ",", "world", "!"}), boost::test_tools::per_element());
  BOOST_TEST(words_of("  a--b  ") == (Words{"a", "-", "-", "b"}), boost::test_tools::per_element());
  BOOST_TEST(words_of("¿qué?") == (Words{"¿", "qué", "?"}), boost::test_tools::per_element());
  BOOST_TEST(words_of(" \t\n ").empty());
}

// Over the golden corpus: no word holds whitespace, a punctuation word is one character, nothing else is lost.
BOOST_AUTO_TEST_CASE(words_cover_the_text) {
  const BertNormalizer normalizer;
  for (const GoldenCase& c : load_golden_cases()) {
    const std::string text = normalizer.normalize(c.text);
    std::string joined, non_space;
    for (const std::string& w : words_of(text)) {
      BOOST_TEST(!w.empty());
      BOOST_TEST(w.find(' ') == std::string::npos, "line " << c.line);
      joined += w;
    }
    for (char ch : text) non_space += ch == ' ' ? "" : std::string(1, ch);
    BOOST_TEST(joined == non_space, "line " << c.line);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wordpiece)

// The example from the BERT README: "unaffable" -> un ##aff ##able.
BOOST_AUTO_TEST_CASE(greedy_longest_match_first) {
  const Vocab vocab = small_vocab({"[UNK]", "un", "##aff", "##able", "a", "ab", "##b", "##bc", "##c"});
  const WordPiece model(vocab, {});
  BOOST_TEST(pieces(model, vocab, "unaffable") == (Words{"un", "##aff", "##able"}), boost::test_tools::per_element());
  BOOST_TEST(pieces(model, vocab, "abc") == (Words{"ab", "##c"}), boost::test_tools::per_element());
  BOOST_TEST(pieces(model, vocab, "unx") == (Words{"[UNK]"}), boost::test_tools::per_element());  // whole word
  BOOST_TEST(pieces(model, vocab, "xab") == (Words{"[UNK]"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(words_longer_than_the_limit_are_unknown) {
  const Vocab vocab = small_vocab({"[UNK]", "a", "##a", "é", "##é"});
  const WordPiece model(vocab, {"[UNK]", "##", 100});
  std::string hundred_e;
  for (int i = 0; i < 100; ++i) hundred_e += "é";  // 100 characters, 200 bytes
  BOOST_TEST(pieces(model, vocab, std::string(100, 'a')).size() == 100u);
  BOOST_TEST(pieces(model, vocab, hundred_e).size() == 100u);
  BOOST_TEST(pieces(model, vocab, std::string(101, 'a')) == (Words{"[UNK]"}), boost::test_tools::per_element());
  BOOST_TEST(pieces(model, vocab, hundred_e + "é") == (Words{"[UNK]"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(other_prefix_and_missing_unk) {
  const Vocab vocab = small_vocab({"<unk>", "run", "@@ning"});
  const WordPiece model(vocab, {"<unk>", "@@", 100});
  BOOST_TEST(pieces(model, vocab, "running") == (Words{"run", "@@ning"}), boost::test_tools::per_element());
  BOOST_CHECK_THROW(WordPiece(vocab, {}), hpctrain::Error);  // "[UNK]" is not in this vocab
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(truncation)

std::vector<int32_t> seq(size_t n) { return std::vector<int32_t>(n, 7); }

// The three cases of tokenizers' truncate_encodings, with n1 the shorter sequence.
BOOST_AUTO_TEST_CASE(longest_first_pairs) {
  struct Case { size_t n1, n2, budget, kept1, kept2; };
  const Case cases[] = {
      {3, 4, 8, 3, 4},     // both fit
      {3, 10, 8, 3, 5},    // the shorter fits in half: kept whole
      {10, 3, 8, 5, 3},    // same, longer one first
      {10, 10, 9, 4, 5},   // both long: halves, the odd token to the second
      {12, 10, 9, 5, 4},   // both long, first longer: the odd token to the first
      {5, 5, 0, 0, 0},
  };
  for (const Case& c : cases) {
    auto a = seq(c.n1), b = seq(c.n2);
    truncate_longest_first(a, &b, c.budget);
    BOOST_TEST(a.size() == c.kept1, c.n1 << "," << c.n2 << " in " << c.budget);
    BOOST_TEST(b.size() == c.kept2, c.n1 << "," << c.n2 << " in " << c.budget);
  }
  auto single = seq(20);
  truncate_longest_first(single, nullptr, 6);
  BOOST_TEST(single.size() == 6u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(token_table)

BOOST_AUTO_TEST_CASE(insert_find_and_grow) {
  TokenTable table;
  BOOST_TEST(table.find("x") == TokenTable::kNotFound);
  for (int i = 0; i < 5000; ++i) BOOST_TEST_REQUIRE(table.insert("token" + std::to_string(i), i));
  BOOST_TEST(!table.insert("token42", 1));
  BOOST_TEST(table.insert(std::string("nul\0byte", 8), 9000));
  BOOST_TEST(table.size() == 5001u);
  for (int i = 0; i < 5000; ++i) BOOST_TEST_REQUIRE(table.find("token" + std::to_string(i)) == i);
  BOOST_TEST(table.find(std::string("nul\0byte", 8)) == 9000);
  BOOST_TEST(table.find("nul") == TokenTable::kNotFound);
  BOOST_TEST(table.find("token5000") == TokenTable::kNotFound);
  BOOST_TEST(table.max_token_bytes() == 9u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(threads)

// encode is const and keeps its scratch per thread: concurrent calls give the single-threaded ids.
BOOST_AUTO_TEST_CASE(concurrent_encode_gives_same_ids) {
  const auto variants = bert_variants();
  const BertTokenizer& tokenizer = variants.at("uncased");
  const std::vector<GoldenCase> cases = load_golden_cases();
  std::vector<std::vector<int32_t>> expected;
  for (const auto& c : cases) expected.push_back(tokenizer.encode(c.text, 64).input_ids);
  std::vector<size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      Encoding out;
      for (size_t round = 0; round < 2; ++round) {
        for (size_t i = t; i < cases.size(); i += 1 + t % 2) {
          tokenizer.encode_into(cases[i].text, std::nullopt, 64, out);
          mismatches[t] += out.input_ids != expected[i];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < mismatches.size(); ++t) BOOST_TEST(mismatches[t] == 0u, "thread " << t);
}

BOOST_AUTO_TEST_SUITE_END()
