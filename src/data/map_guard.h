// Token files are memory-mapped: one truncated while a run reads it (rewritten in place, a full disk
// emptying it) raises SIGBUS at the next read past its new end, which would end the run with "Bus error",
// no summary and no word of which file. A guarded map turns that fault into a flag its reader checks.
#pragma once
#include <cstddef>

namespace poslab {

// Guards the mapping [begin, begin + bytes) (installing the SIGBUS handler on first use). Returns its slot,
// or -1 when every slot is taken (that map is then unguarded, as before).
int guard_mapping(const void* begin, size_t bytes);
// Before the mapping is unmapped.
void unguard_mapping(int slot);
// True once a read in the slot's mapping faulted past the file's end: the handler mapped zero pages from
// that page to the mapping's end so that the read completed; what it read there is not the file's.
bool mapping_lost(int slot);

}  // namespace poslab
