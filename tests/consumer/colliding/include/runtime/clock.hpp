#pragma once
// The application's own runtime/clock.hpp (see base/time.hpp beside it).
namespace application {
inline long clock_ticks() { return 42; }
}  // namespace application
