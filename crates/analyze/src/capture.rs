//! Reading capture files (pcap, pcapng) frame by frame with the `pcap-file` crate.
//! A damaged file does not abort the analysis: what was read so far is kept and the
//! problem is reported as a warning.

use anyhow::{bail, Context, Result};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, TsResolution};
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// One captured frame.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Capture timestamp (since the epoch, as recorded).
    pub ts: Duration,
    pub linktype: DataLink,
    /// The captured bytes (may be shorter than `orig_len` with a small snaplen).
    pub data: &'a [u8],
    pub orig_len: u32,
}

/// How reading ended.
#[derive(Debug, Clone, Default)]
pub struct ReadEnd {
    /// "pcap" or "pcapng".
    pub format: &'static str,
    /// Set when the file was damaged or cut off; frames before the damage were delivered.
    pub warning: Option<String>,
}

const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
];
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Call `each` for every frame of a pcap or pcapng stream.
pub fn read_frames<R: Read>(reader: R, mut each: impl FnMut(Frame<'_>)) -> Result<ReadEnd> {
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let head = reader.fill_buf().context("cannot read the capture")?;
    if head.len() < 4 {
        bail!("not a capture file: only {} bytes", head.len());
    }
    let magic: [u8; 4] = [head[0], head[1], head[2], head[3]];
    if PCAP_MAGICS.contains(&magic) {
        read_pcap(reader, &mut each)
    } else if magic == PCAPNG_MAGIC {
        read_pcapng(reader, &mut each)
    } else {
        bail!(
            "not a pcap or pcapng file (magic {:02x}{:02x}{:02x}{:02x})",
            magic[0],
            magic[1],
            magic[2],
            magic[3]
        )
    }
}

fn read_pcap<R: Read>(reader: R, each: &mut dyn FnMut(Frame<'_>)) -> Result<ReadEnd> {
    let mut r = PcapReader::new(reader).map_err(|e| anyhow::anyhow!("bad pcap header: {e}"))?;
    let header = r.header();
    let mut end = ReadEnd {
        format: "pcap",
        warning: None,
    };
    let mut n = 0u64;
    while let Some(p) = r.next_raw_packet() {
        match p {
            Ok(p) => {
                n += 1;
                let nanos = match header.ts_resolution {
                    TsResolution::MicroSecond => (p.ts_frac as u64) * 1000,
                    TsResolution::NanoSecond => p.ts_frac as u64,
                };
                let ts = Duration::from_secs(p.ts_sec as u64)
                    + Duration::from_nanos(nanos.min(999_999_999));
                each(Frame {
                    ts,
                    linktype: header.datalink,
                    data: &p.data,
                    orig_len: p.orig_len,
                });
            }
            Err(e) => {
                end.warning = Some(damage(n, &e));
                break;
            }
        }
    }
    Ok(end)
}

fn read_pcapng<R: Read>(reader: R, each: &mut dyn FnMut(Frame<'_>)) -> Result<ReadEnd> {
    let mut r =
        PcapNgReader::new(reader).map_err(|e| anyhow::anyhow!("bad pcapng section header: {e}"))?;
    let mut end = ReadEnd {
        format: "pcapng",
        warning: None,
    };
    let mut n = 0u64;
    let mut links: Vec<DataLink> = Vec::new();
    while let Some(b) = r.next_block() {
        let block = match b {
            Ok(b) => b,
            Err(e) => {
                end.warning = Some(damage(n, &e));
                break;
            }
        };
        match block {
            Block::EnhancedPacket(p) => {
                n += 1;
                let Some(&linktype) = links.get(p.interface_id as usize) else {
                    end.warning = Some(format!(
                        "packet {n} names interface {} which was never described",
                        p.interface_id
                    ));
                    continue;
                };
                each(Frame {
                    ts: p.timestamp,
                    linktype,
                    data: &p.data,
                    orig_len: p.original_len,
                });
            }
            Block::SimplePacket(p) => {
                n += 1;
                let Some(&linktype) = links.first() else {
                    end.warning = Some(format!("packet {n} precedes any interface description"));
                    continue;
                };
                each(Frame {
                    ts: Duration::ZERO,
                    linktype,
                    data: &p.data,
                    orig_len: p.original_len,
                });
            }
            Block::InterfaceDescription(d) => links.push(d.linktype),
            Block::SectionHeader(_) => links.clear(),
            _ => {}
        }
    }
    Ok(end)
}

fn damage(frames_read: u64, e: &pcap_file::PcapError) -> String {
    match e {
        pcap_file::PcapError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("capture is cut off after {frames_read} frames (last frame incomplete)")
        }
        other => format!("capture is damaged after {frames_read} frames: {other}"),
    }
}
