//! A digest of a server's run: every request in the order it was answered
//! (verb, resource, object, user, client, code, lost answer) and every
//! object it holds at the end, by resource and key, as JSON (object members
//! in key order). Two runs with the same digest sent the same requests in
//! the same order, got the same answers and left the same objects; a
//! deterministic simulation replays its digest bit for bit.
//!
//! 64-bit FNV-1a: fixed, stable across builds and machines, and fast
//! enough for the tens of thousands of requests of a run.

use std::fmt;

use super::stats::RequestLogEntry;
use serde_json::Value;

/// The digest of a run (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(
    /// The hash's 64 bits.
    pub u64,
);

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// 64-bit FNV-1a over a stream of bytes.
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// A field, closed by a separator no JSON or name contains unescaped.
    fn field(&mut self, text: &str) {
        self.write(text.as_bytes());
        self.write(&[0]);
    }

    pub(crate) fn request(&mut self, entry: &RequestLogEntry) {
        self.field(&format!("{entry:?}"));
    }

    /// One stored object of `resource` (group/plural).
    pub(crate) fn object(&mut self, resource: &str, object: &Value) {
        self.field(resource);
        self.field(&object.to_string());
    }

    pub(crate) fn finish(&self) -> Digest {
        Digest(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_fnv_1a_and_tells_field_boundaries() {
        let mut empty = Fnv::new();
        empty.write(b"");
        assert_eq!(empty.finish().to_string(), "cbf29ce484222325");
        let mut a = Fnv::new();
        a.write(b"a");
        assert_eq!(a.finish(), Digest(0xaf63_dc4c_8601_ec8c));
        let (mut ab, mut a_b) = (Fnv::new(), Fnv::new());
        ab.field("ab");
        a_b.field("a");
        a_b.field("b");
        assert_ne!(ab.finish(), a_b.finish());
    }
}
