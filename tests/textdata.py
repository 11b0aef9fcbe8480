"""Text with hand-counted properties, shared by tests."""

# "আমি বাংলা গান ক্ষমা।" spelled out so every count below is checkable by eye.
AMI = [0x0986, 0x09AE, 0x09BF]  # আ ম ি      -> graphemes [আ][মি]
BANGLA = [0x09AC, 0x09BE, 0x0982, 0x09B2, 0x09BE]  # ব া ং ল া  -> [বাং][লা]
GAN = [0x0997, 0x09BE, 0x09A8]  # গ া ন      -> [গা][ন]
KSHAMA = [0x0995, 0x09CD, 0x09B7, 0x09AE, 0x09BE]  # ক ্ ষ ম া  -> [ক্ষ][মা] (GB9c conjunct)
SENTENCE = "".join(map(chr, AMI + [0x20] + BANGLA + [0x20] + GAN + [0x20] + KSHAMA + [0x0964]))
