"""pytorch/examples' DCGAN in miniature, on 16x16 toy images.

The images are bright discs of random size and place on a dark background,
scaled to [-1, 1], served by a DataLoader. The generator upsamples noise with
ConvTranspose2d, BatchNorm2d and ReLU to a Tanh image; the discriminator
downsamples with Conv2d, LeakyReLU and BatchNorm2d to a Sigmoid probability. Both
are initialized by ``model.apply(weights_init)`` with ``nn.init`` (then the same
distributions drawn from numpy, so that both libraries start alike) and trained
the example's way: a D step on real images and on ``fake.detach()``, then a G
step against ``label.fill_(real_label)``, with BCELoss and two Adam optimizers
(betas 0.5, 0.999). The noise comes from numpy, one draw per step.
"""

import numpy as np

IMAGES = 32
IMAGE_SIZE = 16
BATCH_SIZE = 8
NZ = 8  # size of the latent vector
NGF = 8
NDF = 8
NC = 1
EPOCHS = 3
LR = 0.0002 * 10  # the example's learning rate, faster for a few steps
BETA1 = 0.5


def run(torch, compile=None) -> dict:
    nn = torch.nn
    rng = np.random.default_rng(7)

    # discs of radius 3..6 around a random centre
    yy, xx = np.mgrid[:IMAGE_SIZE, :IMAGE_SIZE]
    centres = rng.uniform(5, IMAGE_SIZE - 5, (IMAGES, 2, 1, 1))
    radii = rng.uniform(3, 6, (IMAGES, 1, 1))
    discs = (yy - centres[:, 0]) ** 2 + (xx - centres[:, 1]) ** 2 < radii**2
    images = torch.tensor(discs[:, None] * 2.0 - 1.0, dtype=torch.float32)
    dataset = torch.utils.data.TensorDataset(images)
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    def numpy_weights_init(m):
        """weights_init's distributions, drawn from numpy."""
        classname = m.__class__.__name__
        mean = 0.0 if classname.find("Conv") != -1 else 1.0
        if classname.find("Conv") != -1 or classname.find("BatchNorm") != -1:
            weight = rng.normal(mean, 0.02, tuple(m.weight.shape))
            with torch.no_grad():
                m.weight.copy_(torch.tensor(weight, dtype=torch.float32))

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is Z, going into a convolution
                nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False),
                nn.BatchNorm2d(NGF * 4),
                nn.ReLU(True),
                # state size. (NGF*4) x 4 x 4
                nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NGF * 2),
                nn.ReLU(True),
                # state size. (NGF*2) x 8 x 8
                nn.ConvTranspose2d(NGF * 2, NC, 4, 2, 1, bias=False),
                nn.Tanh(),
                # state size. (NC) x 16 x 16
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                # input is (NC) x 16 x 16
                nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (NDF) x 8 x 8
                nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),
                nn.BatchNorm2d(NDF * 2),
                nn.LeakyReLU(0.2, inplace=True),
                # state size. (NDF*2) x 4 x 4
                nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),
                nn.Sigmoid(),
            )

        def forward(self, input):
            output = self.main(input)
            return output.view(-1, 1).squeeze(1)

    netG = Generator()
    netG.apply(weights_init)
    netG.apply(numpy_weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    netD.apply(numpy_weights_init)

    criterion = nn.BCELoss()
    fixed_noise = torch.tensor(rng.standard_normal((4, NZ, 1, 1)), dtype=torch.float32)
    real_label = 1
    fake_label = 0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=LR, betas=(BETA1, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=LR, betas=(BETA1, 0.999))

    def train_step(real_cpu, noise):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        # train with fake
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        return errD.item(), errG.item(), D_x, D_G_z1, D_G_z2

    if compile:
        train_step = compile(train_step)

    history = []
    for _ in range(EPOCHS):
        for data in dataloader:
            real_cpu = data[0]
            noise = torch.tensor(
                rng.standard_normal((real_cpu.size(0), NZ, 1, 1)), dtype=torch.float32
            )
            errD, errG, D_x, D_G_z1, D_G_z2 = train_step(real_cpu, noise)
            history.append([errD, errG, D_x, D_G_z1, D_G_z2])

    with torch.no_grad():
        fake = netG(fixed_noise)  # in training mode, as the example samples it
        netG.eval()
        netD.eval()
        fake_eval = netG(fixed_noise)
        d_real = netD(images[:8])
        d_fake = netD(fake_eval)

    bn = netG.main[1]
    return {
        "generator_parameters": [[n, list(p.shape)] for n, p in netG.named_parameters()],
        "discriminator_parameters": [[n, list(p.shape)] for n, p in netD.named_parameters()],
        "history (errD, errG, D_x, D_G_z1, D_G_z2)": history,
        "fake_shape": list(fake.shape),
        "fake[0, 0, 8]": fake[0, 0, 8].tolist(),
        "fake_eval_mean_per_sample": fake_eval.mean(dim=(1, 2, 3)).tolist(),
        "D(real) in eval": d_real.tolist(),
        "D(fake) in eval": d_fake.tolist(),
        "G bn running_mean": bn.running_mean.tolist(),
        "G bn running_var": bn.running_var.tolist(),
        "G bn num_batches_tracked": bn.num_batches_tracked.item(),
        "D bn weight": netD.main[3].weight.tolist(),
        "generator_norms": [p.norm().item() for p in netG.parameters()],
        "discriminator_norms": [p.norm().item() for p in netD.parameters()],
        "adam_step": optimizerD.state[netD.main[0].weight]["step"].item(),
    }
