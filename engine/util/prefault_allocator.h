// An allocator for large, short-lived index structures: allocations of 1 MiB and more come
// from mmap(MAP_POPULATE), which faults their pages in one system call instead of one trap
// per 4 KiB page (measured: page faults dominated indexing the 497k-tensor K3 checkpoint).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace nj {

template <typename T>
struct PrefaultAllocator {
  using value_type = T;
  static constexpr size_t kThreshold = 1u << 20;

  PrefaultAllocator() = default;
  template <typename U>
  PrefaultAllocator(const PrefaultAllocator<U>&) {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kThreshold) {
      void* p = std::malloc(bytes ? bytes : 1);
      if (!p) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kThreshold) std::free(p);
    else ::munmap(p, bytes);
  }
  template <typename U>
  bool operator==(const PrefaultAllocator<U>&) const { return true; }
};

}  // namespace nj
