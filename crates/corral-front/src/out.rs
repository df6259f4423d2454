//! Text to stderr without the standard library: a line formatted into a
//! fixed buffer, written with one write(2).

/// A line being formatted (longer text is cut at 1 KiB).
pub struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Line {
    pub fn new() -> Line {
        Line {
            buf: [0; 1024],
            len: 0,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn to_stderr(&self) {
        let mut rest = self.as_bytes();
        while !rest.is_empty() {
            match rustix::io::write(crate::sys::stdio(2), rest) {
                Ok(0) | Err(_) => break,
                Ok(n) => rest = &rest[n..],
            }
        }
    }
}

impl Default for Line {
    fn default() -> Line {
        Line::new()
    }
}

impl core::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// `corral: {args}` and a newline on stderr.
pub fn say(args: core::fmt::Arguments) {
    let mut line = Line::new();
    let _ = core::fmt::write(&mut line, format_args!("corral: {args}\n"));
    line.to_stderr();
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn a_line_is_cut_at_its_buffer() {
        let mut l = Line::new();
        write!(l, "a{}", 1).unwrap();
        assert_eq!(l.as_bytes(), b"a1");
        for _ in 0..2000 {
            l.write_str("x").unwrap();
        }
        assert_eq!(l.as_bytes().len(), 1024);
    }
}
