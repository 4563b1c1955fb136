//! JSON written pretty, as `serde_json::to_writer_pretty` writes it, byte for byte, but each
//! line break and its indent in one write: written an indent at a time, each key of a
//! report (some 700 000 for the 6 000 jobs of a small benchmark log) cost a call per level.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::Formatter;

/// Levels of nesting whose indent is written at once (deeper ones, which no report has, a
/// level at a time after them).
const MAX_DEPTH: usize = 32;

/// `,`, a line break, and the indent of [`MAX_DEPTH`] levels of two spaces.
const BREAK: [u8; 2 + 2 * MAX_DEPTH] = {
    let mut b = [b' '; 2 + 2 * MAX_DEPTH];
    b[0] = b',';
    b[1] = b'\n';
    b
};

/// serde_json's `PrettyFormatter` with its default indent of two spaces.
#[derive(Debug, Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    /// A line break (after a comma unless `first`) and the indent of the current depth.
    fn new_line<W: ?Sized + Write>(&self, w: &mut W, first: bool) -> io::Result<()> {
        let from = usize::from(first);
        let levels = self.depth.min(MAX_DEPTH);
        w.write_all(&BREAK[from..2 + 2 * levels])?;
        for _ in MAX_DEPTH..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl Pretty {
    /// An array or object opens: one level deeper, no value yet.
    fn open<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// It closes: on a line of its own at its depth if it held a value.
    fn close<W: ?Sized + Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.new_line(w, true)?;
        }
        w.write_all(bracket)
    }
}

impl Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.new_line(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.new_line(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// `serde_json::to_writer_pretty`, faster on large reports.
pub fn to_writer_pretty<W: Write, T: ?Sized + Serialize>(
    w: W,
    value: &T,
) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        w,
        Pretty::default(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    /// The same bytes as serde_json's own pretty writer, for values nested from 4 to some
    /// 45 levels deep (past the 32 whose indent is written at once), with empty and full
    /// arrays and objects, strings that need escaping, numbers and nulls.
    #[test]
    fn writes_what_serde_json_writes() {
        let mut v = json!({
            "a": [1, 2.5, null, true, "x\"\n\u{1}"],
            "empty_object": {},
            "empty_array": [],
            "nested": [{"k": []}, [[]], {"m": {"n": [{}]}}],
        });
        for depth in 0..40 {
            let mut ours = Vec::new();
            super::to_writer_pretty(&mut ours, &v).unwrap();
            let theirs = serde_json::to_vec_pretty(&v).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                String::from_utf8(theirs).unwrap(),
                "at depth {depth}"
            );
            v = if depth % 2 == 0 {
                json!({ "level": depth, "inner": v, "after": [depth] })
            } else {
                Value::Array(vec![json!(depth), v, json!({})])
            };
        }
    }
}
