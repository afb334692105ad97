//! `nena analyze` on synthetic captures (no network needed): the JSON shape, the table,
//! the plots (PNG and SVG checked as images and as XML), and one clear error per hostile
//! input.
use crate::harness::nena;

use nena_analyze::craft;
use serde_json::Value;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};

struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("nena-analyze-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One MPTCP connection (token 0xabcd) whose two joined subflows are captured in two
/// files; the second subflow sends DSNs 30000..40000 again.
fn two_subflows(dir: &TempDir) -> (PathBuf, PathBuf) {
    let srv: SocketAddrV4 = "198.18.3.2:7000".parse().unwrap();
    let c1: SocketAddrV4 = "198.18.1.2:40000".parse().unwrap();
    let c2: SocketAddrV4 = "198.18.2.2:40001".parse().unwrap();
    let data: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    let a = craft::joined_subflow(c1, srv, 0xabcd, &[(0, &data[..40_000])], 1400, true, 0);
    let b = craft::joined_subflow(c2, srv, 0xabcd, &[(30_000, &data[30_000..])], 1400, true, 7);
    (dir.file("a.pcap", &a), dir.file("b.pcap", &b))
}

#[test]
fn json_has_connections_subflows_and_payload_bytes() {
    let dir = TempDir::new("json");
    let (a, b) = two_subflows(&dir);
    let out = nena(&["analyze", s(&a), s(&b), "--json", "--bin", "250ms"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bin"], 0.25);
    let conns = v["connections"].as_array().unwrap();
    assert_eq!(conns.len(), 1, "{v:#}");
    let c = &conns[0];
    assert_eq!(c["mptcp"], true);
    assert_eq!(c["token"], "0000abcd");
    let subs = c["subflows"].as_array().unwrap();
    assert_eq!(subs.len(), 2);
    let mut total = 0;
    for sf in subs {
        for k in ["src", "dst"] {
            let a: SocketAddr = sf[k].as_str().unwrap().parse().expect("ip:port");
            assert!(a.port() > 0);
        }
        assert_eq!(sf["dst"], "198.18.3.2:7000");
        assert_eq!(sf["join"], true);
        assert_eq!(sf["backup"], false);
        assert!(sf["start"].as_f64().unwrap() <= sf["end"].as_f64().unwrap());
        assert_eq!(sf["payload_bytes"]["s2c"], 0);
        total += sf["payload_bytes"]["c2s"].as_u64().unwrap();
        assert!(sf["rtt"]["c2s"]["samples"].is_u64());
        assert!(!sf["throughput"]["c2s"].as_array().unwrap().is_empty());
    }
    // 40000 on the first; 30000 on the second plus every 7th of its 22 segments again.
    let second = &subs[1]["payload_bytes"]["c2s"];
    assert_eq!(subs[0]["payload_bytes"]["c2s"], 40_000);
    assert_eq!(second.as_u64().unwrap(), 30_000 + 3 * 1400);
    assert_eq!(total, 74_200);
    assert_eq!(subs[1]["retransmitted_bytes"]["c2s"], 3 * 1400);
    let d = &c["data"]["c2s"];
    assert_eq!(d["bytes_covered"], 60_000);
    assert_eq!(d["reinjected_bytes"], 10_000);
    assert_eq!(v["plots"].as_array().unwrap().len(), 0);

    // The table for people names the connection, both subflows and the reinjection.
    let out = nena(&["analyze", s(&a), s(&b)]);
    assert!(out.status.success());
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("connection 0: MPTCP token 0000abcd"), "{t}");
    assert!(t.contains("198.18.1.2:40000 > 198.18.3.2:7000 join"), "{t}");
    assert!(t.contains("198.18.2.2:40001 > 198.18.3.2:7000 join"), "{t}");
    assert!(t.contains("reinjected 10000 B"), "{t}");
}

fn png_size(b: &[u8]) -> (u32, u32) {
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "PNG magic");
    assert_eq!(&b[12..16], b"IHDR");
    (
        u32::from_be_bytes(b[16..20].try_into().unwrap()),
        u32::from_be_bytes(b[20..24].try_into().unwrap()),
    )
}

#[test]
fn plot_writes_png_and_svg_per_figure() {
    let dir = TempDir::new("plot");
    let (a, b) = two_subflows(&dir);
    // and a plain TCP connection whose segments are acknowledged (RTT samples)
    let tcp = craft::connection(
        "198.18.1.2:40002".parse().unwrap(),
        "198.18.3.2:7000".parse().unwrap(),
        &[3u8; 50_000],
        1000,
    );
    let c = dir.file("tcp.pcap", &tcp);
    let out_dir = dir.join("plots");
    let out = nena(&[
        "analyze",
        s(&a),
        s(&b),
        s(&c),
        "--json",
        "--plot",
        s(&out_dir),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plots: Vec<String> = v["plots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(plots.len(), 2 * (3 + 2), "{plots:?}");
    for stem in [
        "conn0-throughput",
        "conn0-rtt",
        "conn0-sequence",
        "conn1-throughput",
        "conn1-rtt",
    ] {
        for ext in ["png", "svg"] {
            let p = out_dir.join(format!("{stem}.{ext}"));
            assert!(plots.contains(&p.display().to_string()), "{plots:?}");
            let bytes = std::fs::read(&p).unwrap();
            assert!(bytes.len() > 1000, "{} is nearly empty", p.display());
            if ext == "png" {
                assert_eq!(png_size(&bytes), (1024, 576), "{}", p.display());
                continue;
            }
            let text = String::from_utf8(bytes).unwrap();
            let doc = roxmltree::Document::parse(&text).expect("SVG is XML");
            assert_eq!(doc.root_element().tag_name().name(), "svg");
            let count = |tag: &str| {
                doc.descendants()
                    .filter(|n| n.tag_name().name() == tag)
                    .count()
            };
            let texts: Vec<&str> = doc
                .descendants()
                .filter(|n| n.tag_name().name() == "text")
                .filter_map(|n| n.text())
                .map(str::trim)
                .collect();
            // One legend entry per series, named after its subflow: the capture it was read
            // from (its path, with several captures), its client address (one server) and
            // direction (connection 0 has no ACKs, hence no RTT series).
            let series: &[&str] = match stem {
                "conn0-rtt" => &[],
                s if s.starts_with("conn0") => {
                    &["#0 a 198.18.1.2:40000 c2s", "#1 b 198.18.2.2:40001 c2s"]
                }
                _ => &["#0 tcp 198.18.1.2:40002 c2s"],
            };
            for name in series {
                assert!(texts.contains(name), "{stem}: no legend {name}: {texts:?}");
            }
            let drawn = count("polyline") + count("path");
            if stem == "conn0-throughput" {
                assert!(texts.contains(&"aggregate c2s"), "{texts:?}");
                // two subflow lines, the aggregate, and their three legend marks
                assert!(drawn >= 6, "{stem}: {drawn} lines");
            } else if stem == "conn1-throughput" {
                assert!(drawn >= 2, "{stem}: {drawn} lines");
            } else if stem == "conn0-rtt" {
                assert_eq!(count("circle"), 0, "{stem}");
            } else {
                // points, and a point per series in the legend
                assert!(count("circle") >= 20, "{stem}: {} points", count("circle"));
            }
            // The time axis spans the whole capture, and the legend is beside the plot,
            // not on it: the first legend name starts in the right 40% of the figure.
            if let Some(name) = series.first() {
                let x_of = |t: &str| {
                    doc.descendants()
                        .find(|n| {
                            n.tag_name().name() == "text" && n.text().map(str::trim) == Some(t)
                        })
                        .and_then(|n| n.attribute("x"))
                        .and_then(|x| x.parse::<f64>().ok())
                        .unwrap()
                };
                assert!(
                    x_of(name) > 1024.0 * 0.6,
                    "{stem}: legend at x {}",
                    x_of(name)
                );
            }
        }
    }
}

#[test]
fn hostile_inputs_give_one_line_and_status_1() {
    let dir = TempDir::new("bad");
    let c: SocketAddrV4 = "198.18.1.2:40000".parse().unwrap();
    let srv: SocketAddrV4 = "198.18.3.2:7000".parse().unwrap();
    let good = craft::connection(c, srv, &[9u8; 5000], 1000);
    let mut bad_len = good.clone();
    bad_len[32..36].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let cases = [
        ("empty", dir.file("empty.pcap", b"")),
        ("garbage", dir.file("garbage.pcap", &[0x42; 4096])),
        ("cut", dir.file("cut.pcap", &good[..good.len() - 10])),
        ("bad-length", dir.file("badlen.pcap", &bad_len)),
        ("missing", dir.join("missing.pcap")),
    ];
    let ok = dir.file("ok.pcap", &good);
    for (name, p) in &cases {
        // Alone, and after a good capture: either way the bad one is named.
        for args in [
            vec!["analyze", s(p)],
            vec!["analyze", s(&ok), s(p), "--json"],
        ] {
            let out = nena(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{name}: {err}");
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
            assert!(err.starts_with("nena: "), "{name}: {err}");
            assert!(
                err.contains(p.file_name().unwrap().to_str().unwrap()),
                "{name}: {err}"
            );
            assert!(!err.contains("panicked"), "{name}: {err}");
            assert!(out.stdout.is_empty(), "{name}");
        }
    }
    assert!(nena(&["analyze", s(&ok)]).status.success());
    let out = nena(&["analyze", s(&ok), "--bin", "0s"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}
