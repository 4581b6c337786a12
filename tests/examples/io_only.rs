//! spdl-io alone: decode two bundled photos for ImageNet evaluation (shorter side 256, center
//! crop 224) and collate them into one `[2, 224, 224, 3]` u8 batch. Run from the repository's
//! root: `cargo run -p spdl-tests --example io_only`.
use spdl_io::{collate, Filter, ImageLoader, SampleContext, Transform};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let loader = ImageLoader::new(Transform::eval(224, Filter::Bilinear));
    let mut images = Vec::new();
    for (index, path) in [
        "data/samples/opencv_fruits.jpg",
        "data/samples/skimage_rocket.jpg",
    ]
    .into_iter()
    .enumerate()
    {
        let bytes = std::fs::read(path)?;
        let ctx = SampleContext {
            key: path, // names the sample in errors
            index: index as u64,
            epoch: 0,
        };
        images.push(loader.load(&bytes, &ctx)?); // decodes only the rows and columns it keeps
    }
    let batch = collate(images)?;
    assert_eq!(batch.shape, [2, 224, 224, 3]);
    println!("{:?}", batch.shape);
    Ok(())
}
