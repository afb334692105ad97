//! Tests of `primitives`.
use super::*;
use std::time::Duration;

/// Every candidate this build has gives OpenSSL's bytes and tags (the check that gates
/// timing), and the ones nena uses are always there.
#[test]
fn every_candidate_matches_openssl() {
    for alg in AeadAlg::ALL {
        for &lib in alg.libs() {
            match checked_aead(lib, alg).unwrap_or_else(|e| panic!("{e:#}")) {
                Made::Ready(_) => {}
                Made::Unavailable(r) => {
                    assert!(
                        ![Lib::OpenSsl, Lib::Ring].contains(&lib),
                        "{}: {r}",
                        lib.name()
                    );
                    if cfg!(feature = "compare-crypto") {
                        panic!("{} {}: {r}", lib.name(), alg.name());
                    }
                }
            }
        }
    }
    for alg in StreamAlg::ALL {
        for &lib in alg.libs() {
            if let Some(r) = check_stream(lib, alg).unwrap_or_else(|e| panic!("{e:#}")) {
                assert!(
                    ![Lib::OpenSsl, Lib::RustCryptoPrev].contains(&lib),
                    "{}: {r}",
                    lib.name()
                );
            }
        }
    }
}

/// A candidate that differs from OpenSSL is caught: a keystream off by one byte of
/// position, and an AEAD whose tag covers other associated data.
#[test]
fn the_check_catches_a_wrong_candidate() {
    struct Shifted(Box<dyn KeystreamImpl>);
    impl KeystreamImpl for Shifted {
        fn apply(&mut self, buf: &mut [u8]) -> Result<()> {
            self.0.apply(buf)
        }
        fn apply_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.0.apply_at(offset + 1, buf)
        }
    }
    let alg = StreamAlg::ChaCha20;
    let mut fresh = || -> Result<Box<dyn KeystreamImpl>> {
        Ok(Box::new(Shifted(Box::new(keystream::OpensslStream::new(
            alg,
            &key_for(32),
            &nonce_base(),
        )?))))
    };
    let e =
        keystream::check_against_openssl(alg, &key_for(32), &nonce_base(), &mut fresh).unwrap_err();
    assert!(e.to_string().contains("offset"), "{e:#}");

    struct OtherAad(aead::RingAead);
    impl AeadImpl for OtherAad {
        fn seal(&mut self, n: &[u8; 12], _: &[u8], b: &mut [u8]) -> Result<[u8; 16]> {
            self.0.seal(n, b"x", b)
        }
        fn open(&mut self, n: &[u8; 12], _: &[u8], b: &mut [u8], t: &[u8; 16]) -> Result<()> {
            self.0.open(n, b"x", b, t)
        }
    }
    let mut bad = OtherAad(aead::RingAead::new(AeadAlg::Aes128Gcm, &key_for(16)).unwrap());
    let e = aead::check_against_openssl(AeadAlg::Aes128Gcm, &key_for(16), &mut bad).unwrap_err();
    assert!(e.to_string().contains("tag"), "{e:#}");
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Known answers through every keystream candidate, by seek: RFC 8439 2.4.2 (ChaCha20,
/// block counter 1 = byte offset 64) and NIST SP 800-38A F.5.1 (CTR-AES128, initial
/// counter block f0..ff = nonce f0..fb, block 0xfcfdfeff).
#[test]
fn keystreams_give_the_known_answers() {
    let chacha_key = hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    let chacha_nonce: [u8; 12] = hex("000000000000004a00000000").try_into().unwrap();
    let chacha_pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let chacha_ct = hex(
            "6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b f91b65c5524733ab8f593dabcd62b357
             1639d624e65152ab8f530c359f0861d8 07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
             5af90bbf74a35be6b40b8eedf2785e42 874d",
        );
    let aes_key = hex("2b7e151628aed2a6abf7158809cf4f3c");
    let aes_nonce: [u8; 12] = hex("f0f1f2f3f4f5f6f7f8f9fafb").try_into().unwrap();
    let aes_pt = hex(
        "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710",
    );
    let aes_ct = hex(
        "874d6191b620e3261bef6864990db6ce 9806f66b7970fdff8617187bb9fffdff
             5ae4df3edbd5d35e5b4f09020db03eab 1e031dda2fbe03d1792170a0f3009cee",
    );
    type Kat<'a> = (StreamAlg, &'a [u8], [u8; 12], u64, &'a [u8], &'a [u8]);
    let cases: [Kat; 2] = [
        (
            StreamAlg::ChaCha20,
            &chacha_key,
            chacha_nonce,
            64,
            chacha_pt,
            &chacha_ct,
        ),
        (
            StreamAlg::Aes128Ctr,
            &aes_key,
            aes_nonce,
            0xfcfd_feff * 16,
            &aes_pt,
            &aes_ct,
        ),
    ];
    for (alg, key, nonce, offset, pt, ct) in cases {
        for &lib in alg.libs() {
            let Made::Ready(mut imp) = keystream::make(lib, alg, key, &nonce).unwrap() else {
                continue;
            };
            let mut buf = pt.to_vec();
            imp.apply_at(offset, &mut buf).unwrap();
            assert_eq!(buf, ct, "{} {}", lib.name(), alg.name());
        }
    }
}

#[test]
fn a_short_run_reports_every_available_candidate() {
    let cfg = PrimConfig {
        harness: HarnessConfig {
            samples: 2,
            sample_time: Duration::from_micros(100),
            warmup: Duration::from_micros(100),
            max_job_time: Duration::from_millis(5),
        },
        sizes: vec![1280, 1405],
        pin: false,
        core: None,
        skew: STREAM_SKEW,
    };
    let r = run(&cfg, &mut |_, _| {}).unwrap();
    let openssl_rows = r.rows.iter().filter(|x| x.lib == "openssl").count();
    // 2 AEADs + 2 keystreams x 2 operations, at 2 sizes.
    assert_eq!(openssl_rows, 12);
    for row in &r.rows {
        assert!(row.ns_per_msg > 0.0 && row.gbps > 0.0, "{row:?}");
        assert!(row.vs_openssl.unwrap() > 0.0, "{row:?}");
        if row.lib == "openssl" {
            assert_eq!(row.vs_openssl, Some(1.0));
        }
    }
    assert!(r
        .rows
        .iter()
        .any(|x| x.lib == "ring" && x.primitive == "aes-128-gcm"));
    assert!(r
        .rows
        .iter()
        .any(|x| x.lib == "rustcrypto-prev" && x.primitive == "chacha20" && x.operation == "seek"));
    assert!(r
        .missing
        .iter()
        .any(|m| m.lib == "ring" && m.primitive == "aes-128-ctr"));
    assert_eq!(r.fastest.len(), 12);
    let text = render_text(&r);
    assert!(text.contains("fastest candidate") && text.contains("chacha20-poly1305"));
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), r.rows.len());
}
