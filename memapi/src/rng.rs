//! A tiny seeded random number generator (splitmix64).
//!
//! memapi needs randomness for `generateName` suffixes, UIDs and reactors
//! that fire with a probability; a seeded generator keeps test runs
//! reproducible without pulling in a dependency.

/// Splitmix64: small, fast and good enough for names and coin flips.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose sequence is fully determined by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        // 53 random bits fill the mantissa exactly.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` random lowercase alphanumeric characters, as `generateName` uses.
    pub(crate) fn alnum(&mut self, n: usize) -> String {
        const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| {
                let i = (self.next_u64() % CHARS.len() as u64) as usize;
                char::from(CHARS[i])
            })
            .collect()
    }

    /// A UUID in version-4 text form, e.g. `3f2b...-...`.
    pub(crate) fn uuid(&mut self) -> String {
        let hi = self.next_u64();
        let lo = self.next_u64();
        let hi = (hi & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000;
        let lo = (lo & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            hi >> 32,
            (hi >> 16) & 0xFFFF,
            hi & 0xFFFF,
            lo >> 48,
            lo & 0xFFFF_FFFF_FFFF
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn uuid_is_version_4_and_reproducible() {
        let a = Rng::new(1).uuid();
        assert_eq!(a, Rng::new(1).uuid());
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(
            parts[3].chars().next(),
            Some('8' | '9' | 'a' | 'b')
        ));
    }

    #[test]
    fn floats_stay_in_unit_interval() {
        let mut r = Rng::new(9);
        assert!(
            (0..1000)
                .map(|_| r.next_f64())
                .all(|f| (0.0..1.0).contains(&f))
        );
        assert_eq!(r.alnum(5).len(), 5);
    }
}
