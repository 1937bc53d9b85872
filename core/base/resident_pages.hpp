#pragma once
// Which pages of a buffer hold memory, and giving pages back: zero keeps in memory only the units
// of parameters it computes with (stage 3) and the gradients not yet reduce-scattered (stages 2
// and 3; core/train/zero.cpp), and its runs measure it.
#include <cstddef>

namespace syncopate {

// Gives the whole pages inside [data, data + bytes) back to the kernel (madvise MADV_DONTNEED);
// the partial pages at either end keep their contents. A page given back counts in no resident
// memory and reads as zeros until it is written again. Only for private anonymous memory (heap
// buffers: a file mapping would read the file back) that no device has pinned (page-locked
// memory would keep its old pages for the device). Returns the bytes given back; 0 where Linux's
// madvise is not available.
size_t release_pages(void* data, size_t bytes);

// Sets [data, data + bytes) to zeros, giving its whole pages back (release_pages, with the same
// conditions) and writing zeros on the partial pages at either end (everywhere where madvise is
// not available).
void clear_pages(void* data, size_t bytes);

// The bytes of [data, data + bytes) that lie on pages present in memory (mincore). A page given
// back and not touched since is not; one read since is (the kernel's page of zeros).
size_t resident_bytes(const void* data, size_t bytes);

}  // namespace syncopate
