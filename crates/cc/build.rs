//! Compiles the four congestion controls in `bpf/` (one object each: `lia`, `olia`,
//! `balia`, `ewtcp`) with clang into OUT_DIR and generates their libbpf-cargo skeletons
//! (`NAME.skel.rs`, the loader convention of crates/policy: a typed field per map, so a
//! struct_ops renamed in C is a compile error, not a failed look-up by string). The
//! programs use a checked-in minimal set of kernel types marked preserve_access_index
//! (`bpf/cc.h`), relocated against the running kernel's BTF when loaded, so the build needs
//! neither bpftool nor the build host's /sys/kernel/btf/vmlinux.
use std::env;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    // <linux/types.h> includes <asm/types.h>, under Debian's multiarch directory.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        "s390x" => "s390x-linux-gnu",
        other => panic!("no multiarch include directory known for {other}"),
    };
    for algo in ["lia", "olia", "balia", "ewtcp"] {
        libbpf_cargo::SkeletonBuilder::new()
            .source(format!("bpf/{algo}.bpf.c"))
            .obj(out.join(format!("{algo}.bpf.o")))
            .reference_obj(true)
            .clang_args([
                format!("-I/usr/include/{multiarch}"),
                "-Ibpf".to_string(),
                "-Wall".to_string(),
                "-mcpu=v3".to_string(),
            ])
            .build_and_generate(out.join(format!("{algo}.skel.rs")))
            .unwrap_or_else(|e| {
                panic!("compiling bpf/{algo}.bpf.c with clang and generating its skeleton: {e}")
            });
    }
    println!("cargo:rerun-if-changed=bpf");
}
