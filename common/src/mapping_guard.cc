#include "embstore/common/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace embstore {
namespace {

struct Slot {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};  // 0: free
  std::atomic<bool> poisoned{false};
};

Slot g_slots[kMaxGuardedMappings];
std::atomic<std::uint64_t> g_faults{0};
struct sigaction g_previous;
std::mutex g_register_mu;  // serializes slot allocation and installs (not used by the handler)

// Runs on the faulting thread. Only async-signal-safe work: atomics, mmap, sigaction.
void OnSigbus(int sig, siginfo_t* info, void* ucontext) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const std::uintptr_t end = s.end.load(std::memory_order_acquire);
    if (end == 0) continue;
    const std::uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (addr < begin || addr >= end) continue;
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    void* page_addr = reinterpret_cast<void*>(addr & ~(page - 1));
    // Replace only the page that faulted: every later bad page faults (and is replaced) on its own,
    // and good pages keep their file data.
    void* r = mmap(page_addr, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r == MAP_FAILED) break;  // cannot repair: fall through to the previous disposition
    s.poisoned.store(true, std::memory_order_release);
    g_faults.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Not ours. Hand the fault to the handler we replaced (which may print a traceback, as Python's
  // faulthandler does), then restore the default disposition and return: the load faults again
  // and the process dies with SIGBUS as it would have without the guard. A fault that reaches
  // this point again while the previous handler runs (a handler that re-raises into us) goes
  // straight to the default, so a chain of handlers can never loop.
  static std::atomic<bool> chaining{false};
  if (!chaining.exchange(true)) {
    if (g_previous.sa_flags & SA_SIGINFO) {
      if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, ucontext);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
               g_previous.sa_handler != nullptr) {
      g_previous.sa_handler(sig);
    }
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

// Installs OnSigbus unless it is the current handler; the handler it replaces becomes the one
// faults outside every range go to. Called with g_register_mu held.
void InstallLocked() {
  struct sigaction current {};
  if (sigaction(SIGBUS, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == OnSigbus) return;
  struct sigaction sa {};
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

Result<std::unique_ptr<MappingGuard>> MappingGuard::Register(std::span<const std::byte> range) {
  std::lock_guard<std::mutex> lock(g_register_mu);
  InstallLocked();
  if (range.empty()) return std::unique_ptr<MappingGuard>(new MappingGuard(-1));
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    Slot& s = g_slots[i];
    if (s.end.load(std::memory_order_acquire) != 0) continue;
    s.poisoned.store(false, std::memory_order_relaxed);
    s.begin.store(reinterpret_cast<std::uintptr_t>(range.data()), std::memory_order_release);
    s.end.store(reinterpret_cast<std::uintptr_t>(range.data() + range.size()),
                std::memory_order_release);
    return std::unique_ptr<MappingGuard>(new MappingGuard(i));
  }
  return Status::ResourceExhausted("more than " + std::to_string(kMaxGuardedMappings) +
                                   " table files are mapped at once");
}

MappingGuard::~MappingGuard() {
  if (slot_ < 0) return;
  std::lock_guard<std::mutex> lock(g_register_mu);
  g_slots[slot_].end.store(0, std::memory_order_release);
  g_slots[slot_].begin.store(0, std::memory_order_release);
}

bool MappingGuard::poisoned() const {
  if (slot_ < 0) return false;
  return g_slots[slot_].poisoned.load(std::memory_order_acquire);
}

std::uint64_t MappingGuard::TotalFaultsAbsorbed() {
  return g_faults.load(std::memory_order_relaxed);
}

}  // namespace embstore
