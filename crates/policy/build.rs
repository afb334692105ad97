//! Compiles the eBPF programs in `bpf/` with clang into the objects that the loaders embed,
//! and generates their libbpf-cargo skeletons (`nena.skel.rs`, `tamper.skel.rs`, `mpc.skel.rs` in OUT_DIR:
//! one typed field per map and program, and the C types of the object's BTF).
//! The programs use only UAPI types (`bpf/uapi.h`: `struct __sk_buff`, `xdp_md`, IP and TCP
//! headers), from the system's UAPI headers (Debian's linux-libc-dev), so the build needs
//! neither the build host's kernel BTF nor bpftool, and gives the same object everywhere.
use std::env;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // <linux/types.h> includes <asm/types.h>, which Debian keeps under the multiarch
    // directory of the host; clang's BPF target does not look there by itself.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        other => panic!("no multiarch include directory known for {other}"),
    };
    let asm_include = format!("-I/usr/include/{multiarch}");

    let obj = out.join("nena.bpf.o");
    libbpf_cargo::SkeletonBuilder::new()
        .source("bpf/nena.bpf.c")
        .obj(&obj)
        // the skeleton include_bytes!()s the object instead of spelling it as a literal
        .reference_obj(true)
        .clang_args([
            asm_include.clone(),
            "-Ibpf".to_string(),
            "-Wall".to_string(),
            "-Wno-unused-function".to_string(),
            "-mcpu=v3".to_string(),
        ])
        .build_and_generate(out.join("nena.skel.rs"))
        .expect("compiling bpf/nena.bpf.c with clang and generating its skeleton");
    // The attack simulator of the lab (`nena lab tamper`): its own small object.
    libbpf_cargo::SkeletonBuilder::new()
        .source("bpf/tamper.bpf.c")
        .obj(out.join("tamper.bpf.o"))
        .reference_obj(true)
        .clang_args([
            asm_include,
            "-Ibpf".to_string(),
            "-Wall".to_string(),
            "-mcpu=v3".to_string(),
        ])
        .build_and_generate(out.join("tamper.skel.rs"))
        .expect("compiling bpf/tamper.bpf.c with clang and generating its skeleton");
    // The papers' negotiation (`--mode kato-mpc`): its own small object.
    libbpf_cargo::SkeletonBuilder::new()
        .source("bpf/mpc.bpf.c")
        .obj(out.join("mpc.bpf.o"))
        .reference_obj(true)
        .clang_args([
            format!("-I/usr/include/{multiarch}"),
            "-Ibpf".to_string(),
            "-Wall".to_string(),
            "-mcpu=v3".to_string(),
        ])
        .build_and_generate(out.join("mpc.skel.rs"))
        .expect("compiling bpf/mpc.bpf.c with clang and generating its skeleton");
    println!("cargo:rerun-if-changed=bpf");
}
