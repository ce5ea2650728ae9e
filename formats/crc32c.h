// CRC-32C (Castagnoli) of recording frames: the SSE4.2 instruction where the
// CPU has it, a table otherwise. Same result either way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace runlens {
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
}
