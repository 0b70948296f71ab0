// Two ranks with different parameters: GradientReducer::average_parameters (Note [Local SGD]) makes every
// parameter the average of both ranks' values, keeps a .grad that was a bucket view, and its traffic is
// exactly the parameters' bytes in the buckets' dtypes (Comm::bytes_sent).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "harness.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"
#include "tiny_model.hpp"

namespace mpi_test {

void local_sgd_average(hpctrain::dist::Comm& comm) {
  for (bool overlap : {true, false}) {
    tiny::Model model = tiny::Model::make(7 + static_cast<uint64_t>(comm.rank()));  // different on each rank
    const tiny::Model mine = model.clone(), rank0 = tiny::Model::make(7), rank1 = tiny::Model::make(8);
    hpctrain::ddp::GradientReducer reducer(comm, model.params, {16, 64, overlap});  // several buckets
    // A synced step first: .grad becomes a view of the bucket buffers the average then reuses.
    model.loss(tiny::input_for(comm.rank())).backward();
    (void)reducer.finalize();
    std::vector<at::Tensor> averaged_grads;
    for (const at::Tensor& grad : model.grads()) averaged_grads.push_back(grad.clone());  // f64 ones alias the buckets
    int64_t expected_bytes = 0;
    for (const auto& [name, tensor] : model.params) expected_bytes += tensor.nbytes();  // f32 and f64, as reduced
    const int64_t before = comm.bytes_sent();
    reducer.average_parameters();
    EXPECT(comm.bytes_sent() - before == expected_bytes, "overlap={}: averaging sent {} bytes, expected {}", overlap,
           comm.bytes_sent() - before, expected_bytes);
    for (std::size_t i = 0; i < model.params.size(); ++i) {
      const auto& [name, tensor] = model.params[i];
      const at::Tensor expected = (rank0.params[i].second + rank1.params[i].second) / 2;
      const double difference = (tensor - expected).abs().max().item<double>();
      EXPECT(difference < 1e-6, "overlap={}: '{}' differs from the average of the ranks by {}", overlap, name, difference);
      EXPECT(!at::equal(tensor, mine.params[i].second), "overlap={}: '{}' did not change", overlap, name);
      EXPECT(at::equal(tensor.grad().to(at::kDouble), averaged_grads[i]), "overlap={}: the .grad of '{}' changed", overlap,
             name);
    }
  }
}

}  // namespace mpi_test
