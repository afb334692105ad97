//! nena-transport: placeholder until its issue lands.
