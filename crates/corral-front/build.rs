// The program brings its own start-up (src/rt.rs): no crt1.o, crti.o...
fn main() {
    println!("cargo:rustc-link-arg-bins=-nostartfiles");
    println!("cargo:rerun-if-changed=build.rs");
}
