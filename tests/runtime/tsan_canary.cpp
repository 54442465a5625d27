// A data race on purpose, built only under ThreadSanitizer (tsan preset):
// scripts/test.sh runs it and requires TSan's report and a failing exit, so
// that the runtime's suites passing under the tsan preset means that they
// ran with the race detector on, not that nothing was watching.
#include <cstdio>
#include <thread>

namespace {
int shared_counter = 0;  // written by two threads with nothing ordering them
}

int main() {
  std::thread writer{[] {
    for (int i = 0; i < 1000; ++i) ++shared_counter;
  }};
  for (int i = 0; i < 1000; ++i) ++shared_counter;
  writer.join();
  std::printf("tsan_canary: %d (a detector that said nothing missed the race)\n", shared_counter);
  return 0;
}
