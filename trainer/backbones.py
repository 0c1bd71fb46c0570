"""The backbone names ``--model`` accepts and their smallest input side, without importing TensorFlow.

``trainer.model`` builds them; ``trainer.cli`` and the host launcher (``launch.request``) check options against
these names before anything heavy starts (``python -m trainer --help`` must not load TensorFlow).

The backbones: DenseNet-121 (CheXNet's, the default), ResNet-50 (Wang et al. 2017's ChestX-ray8 baseline) and
MobileNet (Howard et al. 2017, https://arxiv.org/abs/1704.04861; Keras' ``MobileNet``, width 1.0): 83 trainable
tensors to DenseNet-121's 364, and a CPU rank's start (mostly tracing the train step and Horovod's per-tensor
ops) came 2.55 times as fast (bench/ratios/backbone_start.py, side by side, 2 rounds) — for smoke runs of a stack
on new nodes, and for tests where the backbone is not what is shown.

Smallest input side: ``tf.keras.applications`` refuses inputs below ``min_size`` (``obtain_input_shape``:
"Input size must be at least 32x32"): 32 for DenseNet-121, ResNet-50 and MobileNet from keras-applications 1.0.6 on
(Keras 2.2.4; keras-team/keras#12059), which TensorFlow 1.12 and later require (setup.py: ``keras_applications >=
1.0.6``); still 32 in Keras 2.15 (keras/src/applications/densenet.py, resnet.py, mobilenet.py; checked by
tests/test_trainer_model.py). Older keras-applications said 197 (ResNet-50) and 221 (DenseNet)
(keras-team/keras-applications#49).
"""

#: ``--model`` name -> ``tf.keras.applications`` constructor
BACKBONES = {"densenet121": "DenseNet121", "resnet50": "ResNet50", "mobilenet": "MobileNet"}
#: ``--model`` name -> smallest ``--image-size`` (pixels)
MIN_IMAGE_SIZE = {"densenet121": 32, "resnet50": 32, "mobilenet": 32}
