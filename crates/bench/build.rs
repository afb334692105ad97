//! Compiles the papers' Figure 14 scrambling code (c/figure14.c) with the system C
//! compiler at -O2, for the informative `paper-revised-c` row of `nena bench codec` (only
//! with the `openssl` feature, which holds the codec table).

fn main() {
    println!("cargo:rerun-if-changed=c/figure14.c");
    if std::env::var_os("CARGO_FEATURE_OPENSSL").is_none() {
        return;
    }
    cc::Build::new()
        .file("c/figure14.c")
        .opt_level(2)
        .warnings(false)
        .compile("nena_figure14");
}
