//! Slice names that carry the slice's index: `generateName` is the index
//! in lower-case hex, zero-padded to at least five digits, then
//! `-<driver>-`, then `<owner>-` when there is an owner; the API server
//! appends five random characters. So a publisher started again finds
//! which of the existing slices stands for which desired one, and slices
//! sort by name in the driver's order. When a pool has more slices than
//! five hex digits count, every index of the pool gets the longer width,
//! so that sorting still works; a name whose index has another width
//! (or none: randomly named slices of older publishers) matches no index.

use std::fmt;

/// The fewest hex digits of an encoded index.
const MIN_INDEX_DIGITS: usize = 5;

/// Why a name carries no index of the expected width.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IndexError {
    /// The first `-` is missing or not right after the expected width.
    #[error("invalid index length or missing separator")]
    Length,
    /// The prefix is not hex, or too large.
    #[error("failed to parse index: {0}")]
    Parse(#[from] std::num::ParseIntError),
}

/// How many hex digits the indexes of a pool of `slices` slices take: at
/// least five, more when the highest index needs them.
pub(crate) fn index_width(slices: usize) -> usize {
    let highest = slices.saturating_sub(1);
    let digits = format!("{highest:x}").len();
    digits.max(MIN_INDEX_DIGITS)
}

/// `index` in hex, zero-padded to `width` digits.
pub(crate) fn encode_index(index: usize, width: usize) -> String {
    format!("{index:0width$x}")
}

/// The index at the start of `name`, which must be exactly `width` hex
/// digits followed by `-`.
pub(crate) fn decode_index(name: &str, width: usize) -> Result<usize, IndexError> {
    match name.find('-') {
        Some(at) if at == width => Ok(usize::from_str_radix(&name[..at], 16)?),
        _ => Err(IndexError::Length),
    }
}

/// The `generateName` of the slice at `index`.
pub(crate) struct GenerateName<'a> {
    /// The slice's index in its pool.
    pub(crate) index: usize,
    /// The index width of the pool.
    pub(crate) width: usize,
    /// The driver's name.
    pub(crate) driver: &'a str,
    /// The owner's name, if there is an owner.
    pub(crate) owner: Option<&'a str>,
}

impl fmt::Display for GenerateName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-",
            encode_index(self.index, self.width),
            self.driver
        )?;
        if let Some(owner) = self.owner {
            write!(f, "{owner}-")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths() {
        for (slices, width) in [
            (0, 5),
            (1, 5),
            (16, 5),
            (0x10000, 5),
            (0x100000, 5),
            (0x100001, 6),
            (0x1000000, 6),
        ] {
            assert_eq!(index_width(slices), width, "{slices} slices");
        }
    }

    #[test]
    fn encoding() {
        for (index, width, want) in [
            (0, 5, "00000"),
            (1, 5, "00001"),
            (9, 5, "00009"),
            (10, 5, "0000a"),
            (26, 5, "0001a"),
            (27, 5, "0001b"),
            (35, 5, "00023"),
            (36, 5, "00024"),
            (100000, 5, "186a0"),
            (0, 6, "000000"),
            (1048576, 6, "100000"),
        ] {
            assert_eq!(encode_index(index, width), want);
        }
    }

    #[test]
    fn decoding() {
        for (name, width, want) in [
            ("00000-", 5, 0),
            ("00001-", 5, 1),
            ("00009-", 5, 9),
            ("0000a-", 5, 10),
            ("0001a-", 5, 26),
            ("0001b-", 5, 27),
            ("00023-", 5, 35),
            ("00024-", 5, 36),
            ("186a0-", 5, 100000),
            ("100000-", 6, 1048576),
            ("80000000-", 8, 0x8000_0000),
            ("00000-driver-owner-suffix", 5, 0),
            ("00001-driver-owner-suffix", 5, 1),
        ] {
            assert_eq!(decode_index(name, width), Ok(want), "{name}");
        }
        for (name, width, want) in [
            ("8000000000000000000-", 19, "failed to parse index"),
            ("00000", 5, "invalid index length or missing separator"),
            ("0000g-", 5, "failed to parse index"),
            ("-0001-", 5, "invalid index length or missing separator"),
            ("00000-", 6, "invalid index length or missing separator"),
            ("100000-", 5, "invalid index length or missing separator"),
            (
                "random-name1",
                5,
                "invalid index length or missing separator",
            ),
        ] {
            let err = decode_index(name, width).expect_err(name).to_string();
            assert!(err.contains(want), "{name}: {err}");
        }
    }

    #[test]
    fn generate_names() {
        let name = |owner| {
            GenerateName {
                index: 2,
                width: 5,
                driver: "driver",
                owner,
            }
            .to_string()
        };
        assert_eq!(name(Some("owner")), "00002-driver-owner-");
        assert_eq!(name(None), "00002-driver-");
    }
}
