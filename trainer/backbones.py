"""The backbone names ``--model`` accepts and their smallest input side, without importing TensorFlow.

``trainer.model`` builds them; ``trainer.cli`` and the host launcher (``launch.request``) check options against
these names before anything heavy starts (``python -m trainer --help`` must not load TensorFlow).

Smallest input side: ``tf.keras.applications`` refuses inputs below ``min_size`` (``obtain_input_shape``:
"Input size must be at least 32x32"): 32 for DenseNet-121 and ResNet-50 from keras-applications 1.0.6 on (Keras 2.2.4;
keras-team/keras#12059), which TensorFlow 1.12 and later require (setup.py: ``keras_applications >= 1.0.6``); still 32
in Keras 2.15 (keras/src/applications/densenet.py, resnet.py; checked by tests/test_trainer_model.py). Older
keras-applications said 197 (ResNet-50) and 221 (DenseNet) (keras-team/keras-applications#49).
"""

#: ``--model`` name -> ``tf.keras.applications`` constructor
BACKBONES = {"densenet121": "DenseNet121", "resnet50": "ResNet50"}
#: ``--model`` name -> smallest ``--image-size`` (pixels)
MIN_IMAGE_SIZE = {"densenet121": 32, "resnet50": 32}
