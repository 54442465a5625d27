#pragma once
// 128-bit unsigned arithmetic for exact products of two 64-bit values (Ratio
// comparison, unbiased bounded random numbers, drift scaling). GCC and Clang
// provide it on every 64-bit target we build for; __extension__ keeps
// -Wpedantic quiet about the non-standard type.

namespace leaseproof {
__extension__ typedef unsigned __int128 uint128;
__extension__ typedef __int128 int128;
}  // namespace leaseproof
