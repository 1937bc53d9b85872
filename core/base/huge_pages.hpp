#pragma once
// Transparent huge pages for large buffers that are read at random for a long time (a training
// set: every step gathers a batch of samples from all over it). With 4 KiB pages such reads
// miss the TLB, and on this kind of virtual machine the first epoch ran 1.5x slower than the
// next ones (fmnist-mlp: 0.69 s against 0.48 s, every step's batch copy) until the page tables
// had warmed up. numpy asks for huge pages for its large arrays too (madvise), which is where
// the PyTorch peer's data lives.
#include <cstddef>

namespace syncopate {

// Asks Linux to back the whole 2 MiB pages inside [data, data + bytes) with huge pages
// (MADV_HUGEPAGE) and to do it now (MADV_COLLAPSE, Linux 6.1 and later), keeping the contents.
// Returns whether the collapse succeeded; when it did not (an older kernel, huge pages turned
// off, a range under 2 MiB), the memory stays as it was and may get huge pages later. Never
// throws.
bool advise_huge_pages(const void* data, size_t bytes);

}  // namespace syncopate
