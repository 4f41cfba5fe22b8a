//! egctl: the operators' command line for eg's management API.

fn main() {}
