// The chunked loss's memory (issue 34, Note [Chunked loss]): one real training step of a small Llama-shaped model
// whose vocabulary dwarfs its width (the shape where the logits dominate, as Llama-3's 128,256 ids at width 4,096),
// measured as estimate-memory --measure measures it (peak RSS growth of the live tensors): the chunked loss's step
// peaks at most 0.6x the unchunked one's, and estimate-memory predicts both within 10 %. A ratio, not a size.
#include <boost/test/unit_test.hpp>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/train/memory_estimate.hpp"

#include <cstdlib>

using namespace hpctrain;

BOOST_AUTO_TEST_SUITE(loss_memory)

BOOST_AUTO_TEST_CASE(the_chunked_step_peaks_below_0_6x_the_unchunked_one) {
  const io::HfConfig config = io::HfConfig::from_json(
      {{"model_type", "llama"}, {"vocab_size", 32000}, {"hidden_size", 32}, {"intermediate_size", 64},
       {"num_hidden_layers", 1}, {"num_attention_heads", 2}, {"num_key_value_heads", 2},
       {"max_position_embeddings", 256}, {"tie_word_embeddings", false}});
  const std::unique_ptr<dist::Comm> comm = dist::make_single_process_comm();
  train::MemoryEstimateOptions options;
  options.batch_size = 2, options.sequence_length = 256;
  const auto measure = [&](int64_t chunk_tokens) {
    options.loss_chunk_tokens = chunk_tokens;
    const int64_t peak = train::measure_training_step(config, options, /*threads=*/1, *comm).peak_bytes;
    const int64_t estimate = train::estimate_memory(config, train::parameter_shapes(config), options).total;
    BOOST_TEST_MESSAGE("--loss-chunk-tokens " << chunk_tokens << ": measured " << peak << " bytes, estimated "
                                               << estimate);
    if (std::getenv("HPCTRAIN_SANITIZED") == nullptr)  // ASan's shadow memory is in the RSS
      BOOST_TEST(std::abs(static_cast<double>(estimate - peak)) <= 0.10 * static_cast<double>(peak));
    return peak;
  };
  const int64_t unchunked = measure(0);
  const int64_t chunked = measure(models::kDefaultLossChunkTokens);
  BOOST_TEST_MESSAGE("chunked / unchunked peak: " << static_cast<double>(chunked) / static_cast<double>(unchunked));
  BOOST_TEST(static_cast<double>(chunked) <= 0.6 * static_cast<double>(unchunked));
}

BOOST_AUTO_TEST_SUITE_END()
