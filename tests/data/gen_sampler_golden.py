#!/usr/bin/env python3
"""Golden orders for tests/data/sampler_test.cpp, from an independent Python implementation of
core/random.hpp (SplitMix64, Lemire's bounded integers, Fisher-Yates, derive_seed) and the sampler's
global mode (Note [Sampler partition]). Run: python3 tests/data/gen_sampler_golden.py"""

M = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & M

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        return z ^ (z >> 31)

    def below(self, bound):
        if bound <= 1:
            return 0
        threshold = ((1 << 64) - bound) % bound
        while True:
            m = self.next() * bound
            if (m & M) >= threshold:
                return m >> 64


def derive_seed(seed, a, b=0):
    mix = SplitMix64(seed ^ ((a * 0xD1B54A32D192ED03) & M) ^ ((b * 0x8CB92BA72F3D8DD7) & M))
    mix.next()
    return mix.next()


def permutation(n, seed):
    items = list(range(n))
    rng = SplitMix64(seed)
    for i in range(n, 1, -1):
        j = rng.below(i)
        items[i - 1], items[j] = items[j], items[i - 1]
    return items


GLOBAL_STREAM = 0x676C6F62616C  # "global"


def global_order(n, rank, world, seed, epoch):
    perm = permutation(n, derive_seed(seed, epoch, GLOBAL_STREAM))
    per_rank = -(-n // world)
    return [(perm[(rank + k * world) % n], rank + k * world >= n) for k in range(per_rank)]


if __name__ == "__main__":
    print("permutation(10, 42):", permutation(10, 42))
    print("global_order(N=7, rank=1, W=3, seed=42, epoch=5):", global_order(7, 1, 3, 42, 5))
