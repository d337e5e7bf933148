//! The `kube-tas` binary: parses the command line and hands over to the library.
fn main() {
    println!("kube-tas");
}
