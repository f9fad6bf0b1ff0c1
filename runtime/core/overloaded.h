// Overloaded: an overload set of lambdas for std::visit, so a visitor lists one case per
// alternative and a missing case fails to compile (when no generic case is given).
#ifndef GPIPE_RUNTIME_CORE_OVERLOADED_H_
#define GPIPE_RUNTIME_CORE_OVERLOADED_H_

namespace gpipe {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace gpipe

#endif  // GPIPE_RUNTIME_CORE_OVERLOADED_H_
