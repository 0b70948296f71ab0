// field_count<T>(): the number of members of an aggregate struct, at compile time, so that a table that
// must describe every member of an options struct fails to compile when a member is added without an
// entry (e.g. Note [Agreed options]). Works for aggregates whose members are not themselves aggregates
// initialised by brace elision (scalars, enums, std::string, std::filesystem::path, ...).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

namespace hpctrain::core {
namespace detail {

struct AnyMember {
  template <typename T>
  constexpr operator T() const noexcept;  // declared only: used in unevaluated contexts
};

template <typename T, typename Indices, typename = void>
struct BracesWith : std::false_type {};
template <typename T, std::size_t... I>
struct BracesWith<T, std::index_sequence<I...>, std::void_t<decltype(T{(void(I), AnyMember{})...})>> : std::true_type {};

}  // namespace detail

template <typename T, std::size_t N = 0>
constexpr std::size_t field_count() {
  static_assert(std::is_aggregate_v<T>, "field_count needs an aggregate");
  if constexpr (detail::BracesWith<T, std::make_index_sequence<N + 1>>::value) return field_count<T, N + 1>();
  else return N;
}

}  // namespace hpctrain::core
