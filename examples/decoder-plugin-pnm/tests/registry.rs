//! The crate docs' example: registered after the built-ins, the plugin is picked by content.

use std::sync::Arc;

use spdl_io::{DecodeOptions, Registry};

#[test]
fn registered_after_the_builtins_it_is_picked_by_content() {
    let mut registry = Registry::with_defaults();
    registry.register(Arc::new(spdl_decoder_pnm::PnmDecoder));
    let img = registry
        .decode(
            "tiny.pgm",
            b"P5 2 1 255 \x00\xff",
            &DecodeOptions::default(),
        )
        .unwrap();
    assert_eq!((img.width, img.height, img.channels), (2, 1, 3)); // gray replicated to RGB
    assert_eq!(img.as_u8().unwrap(), &[0, 0, 0, 255, 255, 255]);
}
