//! nena-bench: placeholder until its issue lands.
