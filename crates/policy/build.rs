//! Compiles the eBPF programs in `bpf/` with clang (CO-RE, BTF) into one object that the
//! loader embeds. `vmlinux.h` is generated here from this kernel's BTF
//! (`bpftool btf dump file /sys/kernel/btf/vmlinux format c`) into OUT_DIR: generating it
//! keeps the repository free of a 3 MB machine-specific header and keeps the types in step
//! with the kernel the programs run on (every nena machine and CI is of the same kind).
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let vmlinux = out.join("vmlinux.h");
    let btf = env::var("NENA_VMLINUX_BTF").unwrap_or_else(|_| "/sys/kernel/btf/vmlinux".into());
    let dump = Command::new("bpftool")
        .args(["btf", "dump", "file", &btf, "format", "c"])
        .output()
        .unwrap_or_else(|e| panic!("running bpftool (run scripts/install-deps.sh): {e}"));
    if !dump.status.success() {
        panic!(
            "bpftool btf dump {btf} failed: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
    }
    std::fs::write(&vmlinux, &dump.stdout).expect("writing vmlinux.h");

    let obj = out.join("nena.bpf.o");
    libbpf_cargo::SkeletonBuilder::new()
        .source("bpf/nena.bpf.c")
        .obj(&obj)
        .clang_args([
            format!("-I{}", out.display()),
            "-Ibpf".to_string(),
            "-Wall".to_string(),
            "-Wno-unused-function".to_string(),
            "-mcpu=v3".to_string(),
        ])
        .build()
        .expect("compiling bpf/nena.bpf.c with clang");
    // The attack simulator of the lab (`nena lab tamper`): its own small object.
    libbpf_cargo::SkeletonBuilder::new()
        .source("bpf/tamper.bpf.c")
        .obj(out.join("tamper.bpf.o"))
        .clang_args([
            format!("-I{}", out.display()),
            "-Wall".to_string(),
            "-mcpu=v3".to_string(),
        ])
        .build()
        .expect("compiling bpf/tamper.bpf.c with clang");
    println!("cargo:rerun-if-changed=bpf");
    println!("cargo:rerun-if-env-changed=NENA_VMLINUX_BTF");
}
