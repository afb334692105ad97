//! Keys and secrets on disk (docs/PROTOCOL.md, "Server key"): the server's key file, the
//! client's `known_servers` (pinning) and the access token file.
//!
//! The parts: [`server_key`] (the server's long-term Ed25519 key file, and whether a file
//! server would serve it), [`known_servers`] (the client's pins on first contact, a key the
//! user gives, and [`ServerKeyCheck`]: which key a client expects), [`token`] (the access
//! token file, [`load_token`]) and [`state_dir`] (nena's state directory, where the files
//! live by default).

pub mod known_servers;
pub mod server_key;
pub mod state_dir;
pub mod token;

pub use known_servers::{
    default_known_servers, entry_name, first_contact_at_info, parse_public_key, KnownServers,
    ServerKeyCheck,
};
pub use server_key::{default_key_file, load_key, load_or_create_key, served_within};
pub use state_dir::state_dir;
pub use token::{load_token, MIN_TOKEN};
