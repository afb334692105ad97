//! nena-policy: placeholder until its issue lands.
