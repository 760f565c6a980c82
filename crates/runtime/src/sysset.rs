//! A set of syscall numbers (0..512) as a bitmap, and its hex text form used in the config.

pub const MAX_SYSCALLS: usize = 512;

/// Bitmap of syscall numbers; bit n set means "syscall n is in the set".
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SysSet(pub [u64; MAX_SYSCALLS / 64]);

impl SysSet {
    pub const EMPTY: SysSet = SysSet([0; MAX_SYSCALLS / 64]);

    pub fn contains(&self, nr: usize) -> bool {
        nr < MAX_SYSCALLS && self.0[nr / 64] >> (nr % 64) & 1 == 1
    }

    pub fn insert(&mut self, nr: usize) {
        if nr < MAX_SYSCALLS {
            self.0[nr / 64] |= 1 << (nr % 64);
        }
    }

    pub fn remove(&mut self, nr: usize) {
        if nr < MAX_SYSCALLS {
            self.0[nr / 64] &= !(1 << (nr % 64));
        }
    }

    /// Parses 128 hex digits, word 0 first, each word most-significant digit first.
    pub fn from_hex(text: &[u8]) -> Option<SysSet> {
        if text.len() != MAX_SYSCALLS / 4 {
            return None;
        }
        let mut set = SysSet::EMPTY;
        for (w, chunk) in text.chunks(16).enumerate() {
            let mut v = 0u64;
            for &c in chunk {
                v = v << 4 | (c as char).to_digit(16)? as u64;
            }
            set.0[w] = v;
        }
        Some(set)
    }

    /// Writes the 128-digit hex form into `out`.
    pub fn write_hex(&self, out: &mut [u8; MAX_SYSCALLS / 4]) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for (w, word) in self.0.iter().enumerate() {
            for d in 0..16 {
                out[w * 16 + d] = DIGITS[(word >> (60 - 4 * d) & 0xf) as usize];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let mut s = SysSet::EMPTY;
        for n in [0, 1, 63, 64, 231, 511] {
            s.insert(n);
        }
        let mut hex = [0u8; 128];
        s.write_hex(&mut hex);
        let back = SysSet::from_hex(&hex).unwrap();
        assert_eq!(back, s);
        assert!(back.contains(231) && !back.contains(230) && !back.contains(9999));
        assert!(SysSet::from_hex(b"00").is_none());
    }
}
