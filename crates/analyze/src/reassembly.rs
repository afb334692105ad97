//! Rebuilding one direction of a TCP connection (one subflow direction) from its segments
//! by sequence number: retransmissions and overlaps are kept once (first copy wins), and a
//! hole (bytes never captured) splits the stream into separate contiguous chunks.

/// Collects the segments of one direction.
#[derive(Debug, Default, Clone)]
pub struct Direction {
    /// Sequence number of the first data byte, once known.
    base: Option<u32>,
    /// Last sequence number seen and its unwrapped offset (handles 32-bit wrap-around).
    last: Option<(u32, i64)>,
    /// (offset from base, payload) of every data-carrying segment.
    pieces: Vec<(i64, Vec<u8>)>,
}

/// The reassembled byte stream of a direction.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stream {
    /// Contiguous runs of bytes: (offset in the stream, bytes), in stream order.
    pub chunks: Vec<(u64, Vec<u8>)>,
    /// Payload bytes seen more than once (retransmissions, overlaps).
    pub duplicate_bytes: u64,
    /// Holes between chunks (data never captured).
    pub gaps: u64,
}

impl Stream {
    /// Bytes of distinct stream data.
    pub fn len(&self) -> u64 {
        self.chunks.iter().map(|(_, c)| c.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

impl Direction {
    /// Add a segment: `seq` as on the wire, `syn` if it carries SYN (its data starts at seq+1).
    pub fn add(&mut self, seq: u32, syn: bool, payload: &[u8]) {
        let data_seq = if syn { seq.wrapping_add(1) } else { seq };
        if syn && self.base.is_none() {
            self.base = Some(data_seq);
            self.last = Some((data_seq, 0));
        }
        if payload.is_empty() {
            return;
        }
        let base = *self.base.get_or_insert(data_seq);
        let (last_seq, last_off) = *self.last.get_or_insert((base, 0));
        let off = last_off + (data_seq.wrapping_sub(last_seq) as i32) as i64;
        self.last = Some((data_seq, off));
        self.pieces.push((off, payload.to_vec()));
    }

    /// Relative sequence number of `seq` (as Wireshark shows it).
    pub fn relative(&self, seq: u32) -> u32 {
        match self.base {
            Some(b) => seq.wrapping_sub(b).wrapping_add(1),
            None => 1,
        }
    }

    /// Relative acknowledgment number of `ack` sent by the *other* direction (whose data
    /// this direction carries), as Wireshark shows it; None before this direction's start
    /// is known.
    pub fn relative_ack(&self, ack: u32) -> Option<u32> {
        self.base.map(|b| ack.wrapping_sub(b).wrapping_add(1))
    }

    /// Payload bytes added so far (counting duplicates).
    pub fn payload_bytes(&self) -> u64 {
        self.pieces.iter().map(|(_, p)| p.len() as u64).sum()
    }

    /// Build the stream. Data before the first byte seen (negative offsets) is kept by
    /// shifting the stream origin.
    pub fn reassemble(self) -> Stream {
        let mut pieces = self.pieces;
        // stable: at equal offsets the earlier capture wins
        pieces.sort_by_key(|p| p.0);
        let origin = pieces.first().map(|p| p.0.min(0)).unwrap_or(0);
        let mut out = Stream::default();
        let mut cur: Option<(u64, Vec<u8>)> = None;
        for (off, data) in pieces {
            let start = (off - origin) as u64;
            let end = start + data.len() as u64;
            match &mut cur {
                Some((cstart, buf)) => {
                    let cend = *cstart + buf.len() as u64;
                    if start > cend {
                        out.chunks.push(cur.take().expect("current chunk"));
                        out.gaps += 1;
                        cur = Some((start, data));
                    } else if end <= cend {
                        out.duplicate_bytes += data.len() as u64;
                    } else {
                        let skip = (cend - start) as usize;
                        out.duplicate_bytes += skip as u64;
                        buf.extend_from_slice(&data[skip..]);
                    }
                }
                None => cur = Some((start, data)),
            }
        }
        if let Some(c) = cur {
            out.chunks.push(c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_out_of_order_and_retransmitted() {
        let mut d = Direction::default();
        d.add(999, true, b"");
        d.add(1000, false, b"hello ");
        d.add(1012, false, b"again");
        d.add(1006, false, b"world ");
        d.add(1000, false, b"hello "); // retransmission
        d.add(1004, false, b"o wo"); // overlap inside
        assert_eq!(d.relative(1006), 7);
        let s = d.reassemble();
        assert_eq!(s.chunks, vec![(0, b"hello world again".to_vec())]);
        assert_eq!(s.duplicate_bytes, 10);
        assert_eq!(s.gaps, 0);
    }

    #[test]
    fn holes_split_chunks_and_partial_overlaps_extend() {
        let mut d = Direction::default();
        d.add(10, false, b"abcd");
        d.add(20, false, b"klmn");
        d.add(12, false, b"cdef"); // extends the first chunk by "ef"
        let s = d.reassemble();
        assert_eq!(
            s.chunks,
            vec![(0, b"abcdef".to_vec()), (10, b"klmn".to_vec())]
        );
        assert_eq!((s.gaps, s.duplicate_bytes, s.len()), (1, 2, 10));
    }

    #[test]
    fn sequence_wraps_around() {
        let mut d = Direction::default();
        d.add(u32::MAX - 2, false, b"abc");
        d.add(0, false, b"def");
        let s = d.reassemble();
        assert_eq!(s.chunks, vec![(0, b"abcdef".to_vec())]);
    }

    #[test]
    fn data_before_the_first_seen_segment() {
        let mut d = Direction::default();
        d.add(100, false, b"world");
        d.add(95, false, b"hello");
        let s = d.reassemble();
        assert_eq!(s.chunks, vec![(0, b"helloworld".to_vec())]);
    }
}
