//! Compiles every BPF program of nena (`bpf/ROOM/*.bpf.c`) with clang into the objects that
//! the loaders embed, and generates their libbpf-cargo skeletons (`NAME.skel.rs` in OUT_DIR for
//! each object below: one typed field per map and program, and the C types of the object's
//! BTF): one loader convention for all of them. The packet programs use only UAPI types
//! (`bpf/uapi.h`: `struct __sk_buff`, `xdp_md`, IP and TCP headers) from the system's UAPI
//! headers (Debian's linux-libc-dev); the congestion controls a checked-in minimal set of
//! kernel types (`bpf/cc/cc.h`, CO-RE). So the build needs neither the build host's kernel
//! BTF nor bpftool, and gives the same objects everywhere.
#[cfg(feature = "bpf")]
use std::env;
#[cfg(feature = "bpf")]
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=bpf");
    // Without the `bpf` feature the crate is the chain file format alone: nothing to compile.
    #[cfg(feature = "bpf")]
    build();
}

#[cfg(feature = "bpf")]
fn build() {
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

    // One object per program family, each in its room of `bpf/` (as in `src/`):
    // the policy chains (dispatcher, actors, selectors, tenants).
    skeleton(
        &out,
        "chains",
        "nena",
        &asm_include,
        &["-Wno-unused-function"],
    );
    // The lab's attackers: `nena lab tamper` (one byte altered) and `nena lab forge` (a
    // pattern XORed at a data sequence number).
    skeleton(&out, "attack", "tamper", &asm_include, &[]);
    skeleton(&out, "attack", "forge", &asm_include, &[]);
    // `nena run`: the cgroup connect/sockops redirect and the mptcpize hook.
    skeleton(&out, "run", "run", &asm_include, &[]);
    // The first-flight hold of the in-kernel path manager (nena-mptcp's gate).
    skeleton(&out, "hold", "hold", &asm_include, &[]);
    // The papers' negotiation (`--mode kato-mpc`): marks and MPTCP keys.
    skeleton(&out, "mpc", "mpc", &asm_include, &[]);
    // The coupled congestion controls (struct_ops): kernel types from `bpf/cc/cc.h`,
    // marked preserve_access_index and relocated against the running kernel's BTF at load.
    for algo in ["lia", "olia", "balia", "ewtcp"] {
        skeleton(&out, "cc", algo, &asm_include, &[]);
    }
}

#[cfg(feature = "bpf")]
/// Compiles `bpf/ROOM/NAME.bpf.c` into `OUT_DIR/NAME.bpf.o` and generates
/// `OUT_DIR/NAME.skel.rs` (the skeleton include_bytes!()s the object instead of spelling it
/// as a literal). `-Ibpf` finds the shared `uapi.h`; a room's own headers sit beside it.
fn skeleton(out: &Path, room: &str, name: &str, asm_include: &str, extra: &[&str]) {
    let mut args = vec![
        asm_include.to_string(),
        "-Ibpf".to_string(),
        "-Wall".to_string(),
        "-mcpu=v3".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let source = format!("bpf/{room}/{name}.bpf.c");
    libbpf_cargo::SkeletonBuilder::new()
        .source(&source)
        .obj(out.join(format!("{name}.bpf.o")))
        .reference_obj(true)
        .clang_args(args)
        .build_and_generate(out.join(format!("{name}.skel.rs")))
        .unwrap_or_else(|e| {
            panic!("compiling {source} with clang and generating its skeleton: {e}")
        });
}
